//! The filesystem driver: its public type, and the contract it keeps.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hermes_core::driver::{
    Browse, Capabilities, Controls, Counters, DeadLetters, Delivery, Inspect, JobStore, LimitStore,
    PriorityQueues, UniqueEmits, Workers, async_trait,
};
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, JsonSerializer, Message, Priority, Serializer};

use crate::core::Core;
use crate::files::QueueDir;
use crate::url::UrlConfig;
use crate::{FileSystemOptions, NAME, naming};

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
    core: Arc<Core>,
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
        naming::validate_queue_name(queue)?;
        let directory = directory.as_ref().to_path_buf();
        let queues =
            PriorityQueues::with(DEFAULT_PRIORITY, Arc::new(QueueDir::new(&directory, queue)));
        let core = Core::new(directory, queues, options, Arc::new(JsonSerializer));
        Ok(FileSystemDriver {
            core: Arc::new(core),
        })
    }

    /// A driver from a URL `file://<absolute directory>?queue=<name>`, as the `hermes` command
    /// and programs that take their queue from the environment use. Parameters, all optional:
    /// `queue` (default `hermes`), `visibility_timeout` (seconds, default 300) and `durable`
    /// (`true` or `false`). A `%XX` escape in the path or a value stands for that byte.
    ///
    /// ```
    /// use hermes_core::Driver;
    /// use hermes_fs::FileSystemDriver;
    ///
    /// let driver = FileSystemDriver::from_url("file:///var/hermes?queue=exports")?;
    /// assert_eq!(driver.directory(), std::path::Path::new("/var/hermes"));
    /// assert!(FileSystemDriver::from_url("file://relative/dir").is_err());
    /// # Ok::<(), hermes_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] for a URL of another scheme, a relative path, an unknown parameter or
    /// a bad value; [`Error::InvalidQueueName`] for a bad queue name.
    pub fn from_url(url: &str) -> Result<Self, Error> {
        let config = UrlConfig::parse(url)?;
        FileSystemDriver::with_options(config.directory, &config.queue, config.options)
    }

    /// The same queues with `serializer` instead of [`JsonSerializer`], as a new instance.
    #[must_use]
    pub fn with_serializer(self, serializer: impl Serializer) -> Self {
        let core = Core::new(
            self.core.directory.clone(),
            self.core.queues_anew(),
            self.core.options.clone(),
            Arc::new(serializer),
        );
        FileSystemDriver {
            core: Arc::new(core),
        }
    }

    /// The directory holding the queue folders.
    pub fn directory(&self) -> &Path {
        &self.core.directory
    }

    /// The folder of the queue of `priority`, when one is set up.
    pub fn queue_path(&self, priority: Priority) -> Option<PathBuf> {
        self.core
            .queues
            .get(priority)
            .ok()
            .map(|q| q.root().to_path_buf())
    }
}

#[async_trait]
impl Driver for FileSystemDriver {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        self.core.capabilities()
    }

    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        self.core.setup_priority_queue(name, priority)
    }

    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        self.core.send(message, priority).await
    }

    async fn receive(
        &self,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        self.core.receive(priorities, wait).await
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.core.ack(delivery).await
    }

    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.core.nack(delivery).await
    }

    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        self.core.extend(delivery, by).await
    }

    fn inspect(&self) -> Option<&dyn Inspect> {
        Some(&*self.core)
    }

    fn browse(&self) -> Option<&dyn Browse> {
        Some(&*self.core)
    }

    fn dead_letters(&self) -> Option<&dyn DeadLetters> {
        Some(&*self.core)
    }

    fn workers(&self) -> Option<&dyn Workers> {
        Some(&*self.core)
    }

    fn unique(&self) -> Option<&dyn UniqueEmits> {
        Some(&*self.core)
    }

    fn limits(&self) -> Option<&dyn LimitStore> {
        Some(&*self.core)
    }

    fn controls(&self) -> Option<&dyn Controls> {
        Some(&*self.core)
    }

    fn jobs(&self) -> Option<&dyn JobStore> {
        Some(&*self.core)
    }

    fn counters(&self) -> Option<&dyn Counters> {
        Some(&*self.core)
    }
}
