//! The dispatcher: the worker loop that takes messages from a driver and runs their handlers.

mod announce;
mod backoff;
mod controls;
mod limits;
mod options;
mod process;
mod register;
mod report;
mod run;
mod runner;
mod slot_cache;
mod start_cache;
mod worker;

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

pub use options::DispatcherOptions;
pub use report::{HandlerOutcome, HandlerRun, Report};

use self::process::Context;
use self::run::{Env, HandlerMap, run_handlers};
use crate::{Driver, Error, Message, Priority, Shutdown};

/// The worker: takes messages from a driver and runs the handlers registered for their type.
///
/// Register typed handlers with [`register_job`](Self::register_job) (an async function of the
/// job and its [`JobContext`](crate::JobContext)) or
/// [`register_job_handler`](Self::register_job_handler) (a [`JobHandler`](crate::JobHandler)
/// with state), and untyped ones, which take the [`Message`], with
/// [`register_fn`](Self::register_fn) or [`register_handler`](Self::register_handler).
///
/// For each message it logs `Start handle message #<id> (<type>) priority:<n>`, runs every
/// handler of the type in registration order (logging `End handle message #<id> (<type>)`
/// after each, `Handler <name> throws exception - <error>` when one fails or panics, or
/// `Handler <name> timed out after <limit>`), sends one delayed retry copy at the same
/// priority when a failed handler's [`RetryPolicy`](crate::RetryPolicy) allows, and then
/// acknowledges the delivery, whatever the outcome. A message whose type has no handler is
/// consumed.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), hermes_core::Error> {
/// use hermes_core::{Dispatcher, Emitter, EchoHandler, Message, DEFAULT_PRIORITY};
/// use hermes_testkit::MemoryDriver;
///
/// let driver = MemoryDriver::new();
/// Emitter::new(driver.clone())
///     .emit(&Message::new("send-email"), DEFAULT_PRIORITY)
///     .await?;
///
/// let mut dispatcher = Dispatcher::new(driver).max_items(1);
/// dispatcher.register_handler("send-email", EchoHandler::new());
/// dispatcher.handle(&[]).await?; // returns after one message
/// # Ok(()) }
/// ```
pub struct Dispatcher {
    driver: Arc<dyn Driver>,
    handlers: HandlerMap,
    shutdowns: Vec<Arc<dyn Shutdown>>,
    cancel: CancellationToken,
    options: DispatcherOptions,
    schedulers: Vec<crate::Scheduler>,
    limits: limits::LimitRules,
}

impl Dispatcher {
    /// A dispatcher taking messages from `driver`. Drivers are cheap clones: pass a clone of
    /// the one the process emits with.
    pub fn new(driver: impl Driver) -> Self {
        Dispatcher::from_arc(Arc::new(driver))
    }

    /// A dispatcher taking messages from a driver held as `Arc<dyn Driver>`.
    pub fn from_arc(driver: Arc<dyn Driver>) -> Self {
        Dispatcher {
            driver,
            handlers: HandlerMap::new(),
            shutdowns: Vec::new(),
            cancel: CancellationToken::new(),
            options: DispatcherOptions::default(),
            schedulers: Vec::new(),
            limits: limits::LimitRules::default(),
        }
    }

    /// The driver it takes messages from.
    pub fn driver(&self) -> &Arc<dyn Driver> {
        &self.driver
    }

    /// Runs `scheduler` while [`handle`](Self::handle) runs, so that the worker also emits the
    /// scheduler's periodic messages; any number of workers may run the same entries (see
    /// [`Scheduler`](crate::Scheduler)). The scheduler stops when `handle` returns.
    #[must_use]
    pub fn with_scheduler(mut self, scheduler: crate::Scheduler) -> Self {
        self.schedulers.push(scheduler);
        self
    }

    /// Adds a shutdown signal; [`handle`](Self::handle) returns once any of them fires.
    #[must_use]
    pub fn with_shutdown(mut self, shutdown: impl Shutdown) -> Self {
        self.shutdowns.push(Arc::new(shutdown));
        self
    }

    /// Handles up to `n` messages at once (at least 1).
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.options.concurrency = n.max(1);
        self
    }

    /// Stops after `n` messages (0 = no limit).
    #[must_use]
    pub fn max_items(mut self, n: u64) -> Self {
        self.options.max_items = n;
        self
    }

    /// Replaces all options.
    #[must_use]
    pub fn options(mut self, options: DispatcherOptions) -> Self {
        self.options = options;
        self.options.concurrency = self.options.concurrency.max(1);
        self
    }

    /// A token that stops [`handle`](Self::handle) like a shutdown signal when cancelled.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Keeps the record of each job (its state, result and progress) for `keep` after its
    /// last change, or none with `None`; see [`DispatcherOptions::keep_outcomes`].
    #[must_use]
    pub fn keep_outcomes(mut self, keep: Option<Duration>) -> Self {
        self.options.keep_outcomes = keep;
        self
    }

    /// Stops any one handler run at `limit` (for handlers without a limit of their own); see
    /// [`DispatcherOptions::time_limit`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use hermes_core::Dispatcher;
    /// use hermes_testkit::MemoryDriver;
    ///
    /// let dispatcher = Dispatcher::new(MemoryDriver::new()).time_limit(Duration::from_secs(60));
    /// assert_eq!(dispatcher.current_options().time_limit, Some(Duration::from_secs(60)));
    /// ```
    #[must_use]
    pub fn time_limit(mut self, limit: Duration) -> Self {
        self.options.time_limit = Some(limit);
        self
    }

    /// Takes and handles messages of `priorities` (empty = every queue of the driver), highest
    /// priority first, until a shutdown signal fires, `max_items` messages were taken, or the
    /// driver fails.
    ///
    /// Temporary driver errors (a lost connection) are logged and retried with backoff for
    /// [`DispatcherOptions::temporary_error_timeout`]; undecodable messages are logged and
    /// skipped unless [`DispatcherOptions::stop_on_undecodable`] is set. On a shutdown, running
    /// handlers get [`DispatcherOptions::grace_period`] to finish; the messages of those still
    /// running then are given back unacknowledged.
    ///
    /// Logs `Exiting hermes dispatcher - shutdown` on a shutdown, and
    /// `Exiting hermes dispatcher - driver error: <error>` before returning an error.
    ///
    /// # Errors
    /// The driver's error that stopped the loop: a permanent one, a temporary one that lasted
    /// too long, or an [`Error::UnknownPriority`] for a filter naming a priority without a queue.
    ///
    /// # Cancellation safety
    /// Dropping the future drops the running handlers; their messages are redelivered (after the
    /// visibility timeout on at-least-once drivers). Prefer a shutdown signal.
    pub async fn handle(&self, priorities: &[Priority]) -> Result<(), Error> {
        if let Some(error) = self.limits.refused() {
            return Err(error);
        }
        let lease = self.options.limit_lease;
        if !(Duration::from_secs(1)..=Duration::from_secs(24 * 3600)).contains(&lease) {
            return Err(Error::Config {
                driver: "limits",
                message: format!("limit_lease is {lease:?}: it must be from 1 s to a day"),
            });
        }
        if !self.limits.is_empty() && self.driver.limits().is_none() {
            return Err(Error::Config {
                driver: "limits",
                message: format!(
                    "limits are declared, but the {} driver has nowhere to keep them: give it \
                     the store of another backend (hermes_core::driver::WithStore)",
                    self.driver.name()
                ),
            });
        }
        let stop = self.cancel.child_token();
        let _watchers: Vec<_> = self
            .shutdowns
            .iter()
            .filter_map(|s| s.token())
            .map(|token| {
                let stop = stop.clone();
                AbortOnDrop(tokio::spawn(async move {
                    tokio::select! {
                        () = token.cancelled() => stop.cancel(),
                        () = stop.cancelled() => {},
                    }
                }))
            })
            .collect();

        let mut info = crate::workers::WorkerInfo::new(
            self.options.concurrency.max(1),
            priorities,
            self.options.announce_ttl.unwrap_or_default(),
        );
        info.limits = self.limits.announced();
        let ctx = Arc::new(Context {
            worker: info.id.clone(),
            driver: self.driver.clone(),
            handlers: self.handlers.clone(),
            shutdowns: self.shutdowns.clone(),
            options: self.options.clone(),
            priorities: priorities.to_vec(),
            started: SystemTime::now(),
            taken: AtomicU64::new(0),
            abort: CancellationToken::new(),
            stop: stop.clone(),
            failure: Mutex::new(None),
            metrics: crate::telemetry::WorkerMetrics::new(self.handlers.keys()),
            running: announce::Running::default(),
            schedulers: self.schedulers.clone(),
            limits: self.limits.clone(),
            waits: limits::Waits::default(),
            controls: controls::ControlState::default(),
            slot_cache: slot_cache::SlotCache::default(),
            start_cache: start_cache::StartCache::default(),
            settles: Arc::default(),
            history: crate::history::Recorder::new(),
        });
        let _history = self.driver.counters().map(|_| {
            let ctx = ctx.clone();
            AbortOnDrop(tokio::spawn(async move {
                loop {
                    tokio::time::sleep(HISTORY_EVERY).await;
                    flush_history(&ctx).await;
                }
            }))
        });
        let slot_keeper = (!self.limits.is_empty()).then(|| {
            let ctx = ctx.clone();
            AbortOnDrop(tokio::spawn(async move {
                let Some(store) = ctx.driver.limits() else {
                    return;
                };
                loop {
                    tokio::time::sleep(slot_cache::KEEP_IDLE / 2).await;
                    ctx.slot_cache.release_idle(store, false).await;
                }
            }))
        });
        // Read before the first receive, so a message paused or cancelled before the worker
        // started is not run.
        let mut reader = controls::Reader::default();
        reader.read(&*ctx.driver, &ctx.controls).await;
        let _controls = self.driver.controls().map(|_| {
            let ctx = ctx.clone();
            AbortOnDrop(tokio::spawn(async move {
                reader.keep_reading(&*ctx.driver, &ctx.controls).await;
            }))
        });
        let announced = self
            .options
            .announce_ttl
            .filter(|_| self.driver.workers().is_some())
            .map(|ttl| {
                let id = info.id.clone();
                let ctx = ctx.clone();
                let beat = AbortOnDrop(tokio::spawn(async move {
                    announce::keep_announced(
                        &*ctx.driver,
                        &ctx.running,
                        &ctx.schedulers,
                        info,
                        ttl,
                    )
                    .await;
                }));
                (id, beat)
            });
        let scheduling = stop.child_token();
        let _schedulers: Vec<_> = self
            .schedulers
            .iter()
            .map(|scheduler| {
                let scheduler = scheduler.clone();
                let stop = scheduling.clone();
                AbortOnDrop(tokio::spawn(async move {
                    if let Err(e) = scheduler.run(stop).await {
                        tracing::error!("The scheduler stopped - {e}");
                    }
                }))
            })
            .collect();
        let _stop_scheduling = scheduling.clone().drop_guard();
        // Each worker receives and handles one message at a time, so a message never crosses
        // tasks between its receive and its acknowledgement.
        let tracker = TaskTracker::new();
        for _ in 0..self.options.concurrency.max(1) {
            let ctx = ctx.clone();
            tracker.spawn(async move { worker::run(&ctx).await });
        }
        tracker.close();
        tokio::select! {
            () = tracker.wait() => {},
            () = stop.cancelled() => {
                if tokio::time::timeout(self.options.grace_period, tracker.wait()).await.is_err() {
                    ctx.abort.cancel();
                    tracker.wait().await;
                }
            }
        }

        drop(slot_keeper);
        if let Some(store) = self.driver.limits() {
            ctx.slot_cache.release_idle(store, true).await;
        }
        if let Some((id, beat)) = announced {
            drop(beat);
            let withdrawn = match self.driver.workers() {
                Some(workers) => workers.withdraw(&id).await,
                None => Ok(()),
            };
            if let Err(e) = withdrawn {
                tracing::warn!("Withdrawing the announcement of worker {id} failed - {e}");
            }
        }
        if let Err(e) = self.driver.flush().await {
            tracing::warn!("Giving back prefetched messages failed - {e}");
        }
        flush_history(&ctx).await;
        if let Some(e) = ctx.take_failure() {
            tracing::error!("Exiting hermes dispatcher - driver error: {e}");
            return Err(e);
        }
        if stop.is_cancelled() {
            tracing::info!("Exiting hermes dispatcher - shutdown");
        } else {
            tracing::info!(
                "Exiting hermes dispatcher - handled max items ({})",
                self.options.max_items
            );
        }
        Ok(())
    }

    /// The options in force.
    pub fn current_options(&self) -> &DispatcherOptions {
        &self.options
    }

    /// Runs `message`'s handlers here and now, as a worker would on a delivery from the queue
    /// of `priority`, and says what came of it: with the same log lines, time limits and retry
    /// decision, but without the driver. Nothing is received or acknowledged, and the retry
    /// copy is returned in the [`Report`] instead of sent. For tests and for messages that
    /// arrive by other means (a webhook, say); `hermes_testkit::perform_job` wraps it.
    ///
    /// Handlers' cancellation tokens fire at their time limit and when this dispatcher's
    /// [`cancellation_token`](Self::cancellation_token) is cancelled.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), hermes_core::Error> {
    /// use hermes_core::{Dispatcher, HandlerOutcome, Message, DEFAULT_PRIORITY};
    /// use hermes_testkit::MemoryDriver;
    ///
    /// let mut dispatcher = Dispatcher::new(MemoryDriver::new());
    /// dispatcher.register_fn("ping", |_message| async { Ok(true) });
    /// let report = dispatcher.perform(&Message::new("ping"), DEFAULT_PRIORITY).await;
    /// assert!(report.succeeded());
    /// assert_eq!(report.runs[0].outcome, HandlerOutcome::Done);
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancellation safety
    /// Dropping the future drops the running handler.
    pub async fn perform(&self, message: &Message, priority: Priority) -> Report {
        let env = Env::new(&self.options, self.cancel.clone(), None);
        let span = tracing::info_span!(
            "hermes.handle",
            id = message.id(),
            r#type = message.message_type(),
            priority,
            retries = message.retries(),
        );
        run_handlers(&self.handlers, message, priority, &env)
            .instrument(span)
            .await
    }
}

impl fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut types: Vec<_> = self.handlers.keys().collect();
        types.sort();
        f.debug_struct("Dispatcher")
            .field("driver", &self.driver)
            .field("handled_types", &types)
            .field("shutdowns", &self.shutdowns)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How often a dispatcher adds what it handled to the backend's counters.
const HISTORY_EVERY: Duration = Duration::from_secs(5);

/// Adds what the dispatcher handled since the last flush to the backend's counters; a failure
/// is logged and what it held is kept for the next flush.
async fn flush_history(ctx: &Context) {
    let Some(counters) = ctx.driver.counters() else {
        return;
    };
    if let Err(e) = ctx.history.flush(counters).await {
        tracing::warn!("Adding to the history's counters failed - {e}");
    }
}
