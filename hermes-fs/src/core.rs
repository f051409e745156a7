//! What the clones of a [`FileSystemDriver`](crate::FileSystemDriver) share: the directory,
//! the options, the queue folders by priority, the serializer, and what keeps idle workers
//! informed (the watcher, the wake-up, when folders need reading again).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use hermes_core::driver::{Capabilities, Delivery, PriorityQueues};
use hermes_core::{Error, Priority, Serializer};
use tokio::sync::Notify;

use crate::files::{QueueDir, Watcher};
use crate::{FileSystemOptions, NAME, naming};

/// The shared state of one driver and its clones.
#[derive(Debug)]
pub(crate) struct Core {
    pub(crate) directory: PathBuf,
    pub(crate) options: FileSystemOptions,
    pub(crate) serializer: Arc<dyn Serializer>,
    pub(crate) queues: PriorityQueues<Arc<QueueDir>>,
    /// Started by the first `receive`: an emitter never watches anything.
    pub(crate) watcher: Mutex<Option<Watcher>>,
    /// Wakes the workers of this instance waiting in `receive`.
    pub(crate) wake: Arc<Notify>,
    pub(crate) schedule: Mutex<Schedule>,
}

/// When the folders need looking at again.
#[derive(Debug)]
pub(crate) struct Schedule {
    pub(crate) next_reclaim: Instant,
    pub(crate) last_scans: BTreeMap<String, Instant>,
}

/// The claim of one file: its queue, its name in `new/`, and its name in `processing/` (which
/// changes as the claim is extended).
#[derive(Debug)]
pub(crate) struct Claim {
    pub(crate) queue: Arc<QueueDir>,
    pub(crate) file: String,
    pub(crate) claimed: Mutex<String>,
}

impl Claim {
    /// The claim of `delivery`, when this driver made it.
    pub(crate) fn of(delivery: &Delivery) -> Result<&Claim, Error> {
        delivery.receipt().downcast::<Claim>(NAME)
    }

    /// The file's name in `processing/`.
    pub(crate) fn claimed(&self) -> MutexGuard<'_, String> {
        self.claimed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Core {
    pub(crate) fn new(
        directory: PathBuf,
        queues: PriorityQueues<Arc<QueueDir>>,
        options: FileSystemOptions,
        serializer: Arc<dyn Serializer>,
    ) -> Self {
        Core {
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
        }
    }

    /// The same queues, in folder objects of their own, for an instance that shares
    /// nothing else with this one.
    pub(crate) fn queues_anew(&self) -> PriorityQueues<Arc<QueueDir>> {
        let queues = PriorityQueues::default();
        for (priority, queue) in self.queues.all() {
            queues.insert(
                priority,
                Arc::new(QueueDir::new(&self.directory, &queue.name)),
            );
        }
        queues
    }

    pub(crate) fn capabilities(&self) -> Capabilities {
        let mut capabilities = Capabilities::all();
        let redelivers = !self.options.visibility_timeout.is_zero();
        capabilities.at_least_once = redelivers;
        capabilities.extend = redelivers;
        capabilities
    }

    pub(crate) fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        naming::validate_queue_name(name)?;
        let queue = Arc::new(QueueDir::new(&self.directory, name));
        self.queues.insert(priority, queue);
        Ok(())
    }

    pub(crate) fn schedule(&self) -> MutexGuard<'_, Schedule> {
        self.schedule.lock().unwrap_or_else(|e| e.into_inner())
    }
}
