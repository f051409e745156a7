//! The filesystem driver.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_core::time::{unix_now, until};
use hermes_core::{
    Capabilities, DEFAULT_PRIORITY, DeadKind, DeadLetter, DeadReason, Delivery, Driver, Emitted,
    Error, JsonSerializer, Message, Priority, PriorityQueues, QueueState, QueueStats, Receipt,
    Replay, Serializer, Unique, WorkerInfo, async_trait, validate_queue_name,
};
use tokio::sync::Notify;

use crate::queue::{Head, QueueDir};
use crate::watch::Watcher;
use crate::{FileSystemOptions, NAME, inspect, naming};

/// How often a watched folder is read whole anyway, in case a notification was lost.
const SAFETY_RESCAN: Duration = Duration::from_secs(60);

/// A queue kept as files in a local directory, as Hermes' `FileSystemDriver`: no broker, one
/// server.
///
/// Each queue is a folder `<directory>/<queue>/` with `tmp/`, `new/`, `processing/` and
/// `failed/`, created on first use. `send` writes the message to `tmp/` and renames it into
/// `new/` under a name that starts with its due time, so name order is due order and a delayed
/// message simply waits in `new/`. A worker claims the first due file by renaming it into
/// `processing/` as `<claim time>~<name>` (when two workers race, one wins and the other moves
/// on), deletes it on `ack` and renames it back on `nack`. A claim older than the visibility
/// timeout goes back to `new/`, so a crashed worker loses nothing. A file that cannot be decoded
/// goes to `failed/`; files that are not message files (other names, links, folders) are left
/// where they are and skipped.
///
/// Beyond Hermes: idle workers are woken by change notifications (inotify) instead of waiting
/// out the refresh interval; a worker keeps an ordered index of `new/` so a backlog of 100,000
/// files costs no more per message than a backlog of 100; and [`FileSystemOptions::durable`]
/// flushes every sent message to disk.
///
/// Inspection and dead letters, exact: counts come from the file names (`new/` split at the
/// current time into waiting and delayed, `processing/`, `failed/`), a peek reads files without
/// moving them. A message whose handler failed for good goes to `failed/` under its name, as
/// undecodable files do, beside `<name>.reason` holding the reason as JSON (kind, error,
/// handler, time, retries); PHP Hermes never reads `failed/`. A file there without a reason
/// file is an undecodable dead letter. [`FileSystemOptions::retention`] caps `failed/`.
///
/// Do not share the directory over NFS or another network filesystem: `rename` is atomic only
/// on one local filesystem. The driver makes short blocking filesystem calls on the calling
/// task; with `durable`, the flushes run on Tokio's blocking pool.
///
/// Clones are cheap and share the queues and the notifications of new files.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), hermes_core::Error> {
/// use std::time::Duration;
/// use hermes_core::{Driver, Message, DEFAULT_PRIORITY};
/// use hermes_fs::FileSystemDriver;
///
/// let dir = std::env::temp_dir().join(format!("hermes-doc-{}", std::process::id()));
/// let driver = FileSystemDriver::new(&dir, "exports")?;
/// driver.setup_priority_queue("exports_high", 110)?;
/// driver.send(&Message::new("report.export"), DEFAULT_PRIORITY).await?;
/// let delivery = driver.receive(&[], Duration::from_secs(1)).await?.expect("a message");
/// driver.ack(&delivery).await?;
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct FileSystemDriver {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) directory: PathBuf,
    pub(crate) options: FileSystemOptions,
    pub(crate) serializer: Arc<dyn Serializer>,
    pub(crate) queues: PriorityQueues<Arc<QueueDir>>,
    /// Started by the first `receive`: an emitter never watches anything.
    watcher: Mutex<Option<Watcher>>,
    pub(crate) wake: Arc<Notify>,
    schedule: Mutex<Schedule>,
}

/// When the folders need looking at again.
#[derive(Debug)]
struct Schedule {
    next_reclaim: Instant,
    last_scans: BTreeMap<String, Instant>,
}

/// The claim of one file.
#[derive(Debug)]
struct FsReceipt {
    queue: Arc<QueueDir>,
    file: String,
    claimed: Mutex<String>,
}

impl FileSystemDriver {
    /// A driver for the queue `queue` (priority [`DEFAULT_PRIORITY`]) in `directory`, with the
    /// default options. Nothing is created until the first `send` or `receive`.
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for a name that is not letters, digits, `.`, `_` and `-`, or
    /// starts with `.`.
    pub fn new(directory: impl AsRef<Path>, queue: &str) -> Result<Self, Error> {
        FileSystemDriver::with_options(directory, queue, FileSystemOptions::default())
    }

    /// [`FileSystemDriver::new`] with `options`.
    ///
    /// # Errors
    /// As [`FileSystemDriver::new`].
    pub fn with_options(
        directory: impl AsRef<Path>,
        queue: &str,
        options: FileSystemOptions,
    ) -> Result<Self, Error> {
        validate_fs_queue_name(queue)?;
        let directory = directory.as_ref().to_path_buf();
        let queues =
            PriorityQueues::with(DEFAULT_PRIORITY, Arc::new(QueueDir::new(&directory, queue)));
        Ok(FileSystemDriver::build(
            directory,
            queues,
            options,
            Arc::new(JsonSerializer),
        ))
    }

    fn build(
        directory: PathBuf,
        queues: PriorityQueues<Arc<QueueDir>>,
        options: FileSystemOptions,
        serializer: Arc<dyn Serializer>,
    ) -> Self {
        FileSystemDriver {
            inner: Arc::new(Inner {
                directory,
                options,
                serializer,
                queues,
                watcher: Mutex::new(None),
                wake: Arc::new(Notify::new()),
                schedule: Mutex::new(Schedule {
                    next_reclaim: Instant::now(),
                    last_scans: BTreeMap::new(),
                }),
            }),
        }
    }

    /// The same queues with `serializer` instead of [`JsonSerializer`], as a new instance.
    #[must_use]
    pub fn with_serializer(self, serializer: impl Serializer) -> Self {
        let queues = PriorityQueues::default();
        for (priority, queue) in self.inner.queues.all() {
            queues.insert(
                priority,
                Arc::new(QueueDir::new(&self.inner.directory, &queue.name)),
            );
        }
        FileSystemDriver::build(
            self.inner.directory.clone(),
            queues,
            self.inner.options.clone(),
            Arc::new(serializer),
        )
    }

    /// The directory holding the queue folders.
    pub fn directory(&self) -> &Path {
        &self.inner.directory
    }

    /// The folder of the queue of `priority`, when one is set up.
    pub fn queue_path(&self, priority: Priority) -> Option<PathBuf> {
        self.inner
            .queues
            .get(priority)
            .ok()
            .map(|q| q.root().to_path_buf())
    }

    /// Creates, watches and indexes the queues a worker reads, the first time.
    fn prepare(&self, queues: &[(Priority, Arc<QueueDir>)]) -> Result<(), Error> {
        for (_, queue) in queues {
            if queue.lock().scanned {
                continue;
            }
            queue.ensure_created()?;
            self.watch_and_scan(queue)?;
        }
        Ok(())
    }

    /// Watches `queue`'s `new/` folder, then reads it whole: in that order, so no file slips
    /// between the read and the watch.
    fn watch_and_scan(&self, queue: &Arc<QueueDir>) -> Result<(), Error> {
        let watched = self.with_watcher(|w| w.watch(queue));
        queue.lock().watched = watched;
        self.scan(queue)
    }

    /// Reads `queue`'s `new/` folder whole and notes when.
    fn scan(&self, queue: &QueueDir) -> Result<(), Error> {
        queue.scan()?;
        self.schedule()
            .last_scans
            .insert(queue.name.clone(), Instant::now());
        Ok(())
    }

    /// Runs `f` on the watcher, starting it the first time.
    fn with_watcher<R>(&self, f: impl FnOnce(&mut Watcher) -> R) -> R {
        let mut watcher = self.inner.watcher.lock().unwrap_or_else(|e| e.into_inner());
        f(watcher.get_or_insert_with(|| {
            Watcher::start(self.inner.options.watch, self.inner.wake.clone())
        }))
    }

    /// With a backlog left after a claim, switches notifications off for `queue`: the index
    /// already holds work, and the worker's own claims would wake it for every message.
    fn pause_watch_if_busy(&self, queue: &QueueDir) {
        let mut state = queue.lock();
        if state.watched && state.files.len() >= 2 {
            state.watched = false;
            state.paused = true;
            drop(state);
            self.with_watcher(|w| w.unwatch(queue));
        }
    }

    /// When the index of a paused queue ran dry: notifications on again, then the folder read
    /// for what arrived meanwhile. Returns whether the queue was paused.
    fn resume_watch(&self, queue: &Arc<QueueDir>) -> Result<bool, Error> {
        if !std::mem::take(&mut queue.lock().paused) {
            return Ok(false);
        }
        self.watch_and_scan(queue)?;
        // Other workers of this instance may be waiting for what the read found.
        self.inner.wake.notify_waiters();
        Ok(true)
    }

    fn schedule(&self) -> std::sync::MutexGuard<'_, Schedule> {
        self.inner
            .schedule
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Rereads folders whose index may be stale and returns expired claims to `new/`. Returns
    /// when this should run again.
    fn maintain(&self, queues: &[(Priority, Arc<QueueDir>)]) -> Result<Instant, Error> {
        let now = Instant::now();
        let refresh = self
            .inner
            .options
            .refresh_interval
            .max(Duration::from_millis(1));
        let mut next = now + SAFETY_RESCAN;
        for (_, queue) in queues {
            let (watched, flagged) = {
                let state = queue.lock();
                // A paused queue is read again when its index runs dry.
                (state.watched || state.paused, state.rescan)
            };
            let period = if watched { SAFETY_RESCAN } else { refresh };
            let last = self.schedule().last_scans.get(&queue.name).copied();
            let due = last.map_or(now, |at| at + period);
            if flagged || due <= now {
                self.scan(queue)?;
                next = next.min(now + period);
            } else {
                next = next.min(due);
            }
        }
        let visibility = self.inner.options.visibility_timeout;
        if visibility.is_zero() {
            return Ok(next);
        }
        let next_reclaim = self.schedule().next_reclaim;
        if next_reclaim <= now {
            let expired_before = unix_now() - visibility.as_secs_f64();
            let mut check_at = now + visibility.min(refresh);
            for (_, queue) in queues {
                if let Some(earliest) = queue.return_expired(expired_before)? {
                    let expires = until(earliest + visibility.as_secs_f64());
                    check_at = check_at.min(now + expires);
                }
            }
            self.schedule().next_reclaim = check_at;
            Ok(next.min(check_at))
        } else {
            Ok(next.min(next_reclaim))
        }
    }

    /// Claims the first due message of `queues`, highest priority first; otherwise returns the
    /// earliest due time among their heads.
    fn try_claim(
        &self,
        queues: &[(Priority, Arc<QueueDir>)],
    ) -> Result<Result<Delivery, Option<f64>>, Error> {
        let now = unix_now();
        let mut next_due: Option<f64> = None;
        for (priority, queue) in queues {
            loop {
                let file = match queue.head(now) {
                    Head::Due(file) => file,
                    Head::NotDue(_) | Head::Empty if self.resume_watch(queue)? => continue,
                    Head::NotDue(due) => {
                        next_due = Some(next_due.map_or(due, |d| d.min(due)));
                        break;
                    }
                    Head::Empty => break,
                };
                let claimed = naming::claimed_file(unix_now(), &file);
                let Some(body) = queue.claim(&file, &claimed)? else {
                    continue;
                };
                self.pause_watch_if_busy(queue);
                return match self.inner.serializer.deserialize(&body) {
                    Ok(message) if !message.is_due_at(now) => {
                        // Put in `new/` ahead of its time (by hand, or by an emitter that
                        // ignores delays): renamed to wait for its due time.
                        queue.postpone(&claimed, message.due())?;
                        continue;
                    }
                    Ok(message) => {
                        let receipt = FsReceipt {
                            queue: queue.clone(),
                            file,
                            claimed: Mutex::new(claimed),
                        };
                        let delivery = Delivery::new(message, *priority, Receipt::new(receipt));
                        Ok(Ok(self.leased(delivery)))
                    }
                    Err(source) => {
                        let reason = DeadReason::new(DeadKind::Undecodable, source.to_string());
                        if let Err(e) = inspect::write_reason(&queue.failed, &file, &reason) {
                            tracing::warn!("Cannot record why {file} is undecodable - {e}");
                        }
                        let to = queue.quarantine(&claimed, &file);
                        Err(Error::Undecodable {
                            quarantine: to.display().to_string(),
                            source,
                        })
                    }
                };
            }
        }
        Ok(Err(next_due))
    }

    /// `delivery` with its lease: the visibility timeout, when claims expire.
    fn leased(&self, delivery: Delivery) -> Delivery {
        let visibility = self.inner.options.visibility_timeout;
        if visibility.is_zero() {
            delivery
        } else {
            delivery.with_lease(visibility)
        }
    }

    /// The queue of `priority` and the checked, encoded `message`.
    pub(crate) fn encode(
        &self,
        message: &Message,
        priority: Priority,
    ) -> Result<(Arc<QueueDir>, Vec<u8>), Error> {
        message.check()?;
        let queue = self.inner.queues.get(priority)?;
        let body = self.inner.serializer.serialize(message)?;
        Ok((queue, body))
    }

    /// Writes the encoded message `body`, due at `due`, into `queue`.
    pub(crate) async fn write_encoded(
        &self,
        queue: &Arc<QueueDir>,
        body: Vec<u8>,
        due: f64,
    ) -> Result<(), Error> {
        queue.ensure_created()?;
        let file = if self.inner.options.durable {
            let queue = queue.clone();
            hermes_core::task::detached_blocking(move || queue.write(&body, due, true)).await?
        } else {
            queue.write(&body, due, false)?
        };
        if queue.lock().scanned {
            queue.added(&file);
            self.inner.wake.notify_waiters();
        }
        Ok(())
    }

    fn capabilities_for(options: &FileSystemOptions) -> Capabilities {
        let mut capabilities = Capabilities::all();
        let redelivers = !options.visibility_timeout.is_zero();
        capabilities.at_least_once = redelivers;
        capabilities.extend = redelivers;
        capabilities
    }
}

/// Hermes' rules for a queue name, and not `workers`, the folder of the workers' announcements.
fn validate_fs_queue_name(name: &str) -> Result<(), Error> {
    validate_queue_name(name)?;
    if name == crate::workers::WORKERS_FOLDER {
        return Err(Error::InvalidQueueName {
            name: name.to_owned(),
            reason: "the folder workers/ holds the workers' announcements",
        });
    }
    Ok(())
}

#[async_trait]
impl Driver for FileSystemDriver {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        FileSystemDriver::capabilities_for(&self.inner.options)
    }

    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        validate_fs_queue_name(name)?;
        let queue = Arc::new(QueueDir::new(&self.inner.directory, name));
        self.inner.queues.insert(priority, queue);
        Ok(())
    }

    async fn send_unique(
        &self,
        message: &Message,
        priority: Priority,
        unique: &Unique,
    ) -> Result<Emitted, Error> {
        self.send_unique_now(message, priority, unique).await
    }

    async fn release_unique(&self, key: &str, holder: &str) -> Result<(), Error> {
        self.give_up_key(key, holder)
    }

    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        let (queue, body) = self.encode(message, priority)?;
        self.write_encoded(&queue, body, message.due()).await
    }

    async fn receive(
        &self,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        let queues = self.inner.queues.selected(priorities)?;
        self.prepare(&queues)?;
        let give_up = Instant::now() + wait;
        loop {
            let notified = self.inner.wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let maintain_at = self.maintain(&queues)?;
            let next_due = match self.try_claim(&queues)? {
                Ok(delivery) => return Ok(Some(delivery)),
                Err(next_due) => next_due,
            };
            let now = Instant::now();
            if now >= give_up {
                return Ok(None);
            }
            let mut wake_at = give_up.min(maintain_at);
            if let Some(due) = next_due {
                wake_at = wake_at.min(now + until(due));
            }
            tokio::select! {
                () = &mut notified => {},
                () = tokio::time::sleep_until(wake_at.into()) => {},
            }
        }
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        let receipt = delivery.receipt().downcast::<FsReceipt>(NAME)?;
        let claimed = receipt.claimed.lock().unwrap_or_else(|e| e.into_inner());
        receipt.queue.delete(&claimed)
    }

    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        let receipt = delivery.receipt().downcast::<FsReceipt>(NAME)?;
        let claimed = receipt.claimed.lock().unwrap_or_else(|e| e.into_inner());
        if receipt.queue.give_back(&claimed, &receipt.file)? {
            self.inner.wake.notify_waiters();
        }
        Ok(())
    }

    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        let visibility = self.inner.options.visibility_timeout;
        if visibility.is_zero() {
            return Ok(());
        }
        let receipt = delivery.receipt().downcast::<FsReceipt>(NAME)?;
        let mut claimed = receipt.claimed.lock().unwrap_or_else(|e| e.into_inner());
        // A claim expires at claim time + visibility timeout.
        let claim_time = unix_now() + by.as_secs_f64() - visibility.as_secs_f64();
        let renamed = naming::claimed_file(claim_time, &receipt.file);
        if receipt.queue.reclaim_as(&claimed, &renamed)? {
            *claimed = renamed;
            Ok(())
        } else {
            Err(Error::InvalidDelivery(format!(
                "the claim of {} expired before it was extended",
                receipt.file
            )))
        }
    }

    async fn stats(&self) -> Result<Vec<QueueStats>, Error> {
        self.stats_now()
    }

    async fn peek(
        &self,
        priority: Priority,
        state: QueueState,
        limit: usize,
    ) -> Result<Vec<Message>, Error> {
        self.peek_now(priority, state, limit)
    }

    async fn dead_letters(
        &self,
        priority: Priority,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, Error> {
        self.dead_letters_now(priority, limit)
    }

    async fn dead_letter(&self, delivery: &Delivery, reason: &DeadReason) -> Result<(), Error> {
        let receipt = delivery.receipt().downcast::<FsReceipt>(NAME)?;
        let claimed = receipt.claimed.lock().unwrap_or_else(|e| e.into_inner());
        self.bury(&receipt.queue, &claimed, &receipt.file, reason)
    }

    async fn replay(&self, priority: Priority, replay: &Replay) -> Result<u64, Error> {
        self.replay_now(priority, replay)
    }

    async fn purge(&self, priority: Priority, state: QueueState) -> Result<Option<u64>, Error> {
        self.purge_now(priority, state).map(Some)
    }

    async fn delete(&self, priority: Priority, id: &str) -> Result<bool, Error> {
        self.delete_now(priority, id)
    }

    async fn announce(&self, worker: &WorkerInfo, ttl: Duration) -> Result<(), Error> {
        let worker = worker.expiring_in(ttl);
        self.announce_now(&worker)
    }

    async fn withdraw(&self, id: &str) -> Result<(), Error> {
        self.withdraw_now(id)
    }

    async fn workers(&self) -> Result<Vec<WorkerInfo>, Error> {
        self.workers_now()
    }
}
