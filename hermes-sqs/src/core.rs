//! What the clones of an [`SqsDriver`](crate::SqsDriver) share: the client, the options, the
//! queues by priority and their URLs, the serializer, and the messages this process holds
//! (claimed from SQS, not handed out yet).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};

use aws_sdk_sqs::Client;
use hermes_core::driver::{Capabilities, Delivery, PriorityQueues};
use hermes_core::{Error, Message, Priority, Serializer};
use tokio::sync::{Notify, OnceCell};
use tokio::time::Instant;

use crate::api::{QueueInfo, make_visible};
use crate::naming::{MAX_QUEUE_NAME_LEN, delay_queue, quarantine_queue, validate_sqs_queue_name};
use crate::{NAME, SqsOptions};

/// The shared state of one driver and its clones.
pub(crate) struct Core {
    pub(crate) client: Client,
    pub(crate) queue: String,
    pub(crate) quarantine: String,
    /// Where messages due later than SQS can delay wait: `<queue>-delay`.
    pub(crate) delay_queue: String,
    /// When a `receive` next looks at the delay queue.
    pub(crate) next_forward: Mutex<Instant>,
    /// Whether a task is moving messages out of the delay queue.
    pub(crate) forwarding: AtomicBool,
    pub(crate) options: SqsOptions,
    pub(crate) serializer: Arc<dyn Serializer>,
    pub(crate) queues: PriorityQueues<String>,
    /// The URL and visibility timeout of each queue, looked up (or created) once.
    pub(crate) resolved: Mutex<HashMap<String, Arc<OnceCell<Arc<QueueInfo>>>>>,
    /// What this process holds of each queue, by queue name.
    pub(crate) state: Mutex<HashMap<String, HeldQueue>>,
    /// Notified when a poll buffered something or ended.
    pub(crate) changed: Notify,
    /// Whether this process is dropping dead letters over the count cap.
    pub(crate) trimming: AtomicBool,
}

impl fmt::Debug for Core {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqsDriver")
            .field("queue", &self.queue)
            .field("quarantine", &self.quarantine)
            .field("delay_queue", &self.delay_queue)
            .field("queues", &self.queues.all())
            .field("options", &self.options)
            .field("serializer", &self.serializer)
            .finish_non_exhaustive()
    }
}

/// What this process holds of one queue.
#[derive(Debug, Default)]
pub(crate) struct HeldQueue {
    /// Taken from SQS, not handed out yet.
    pub(crate) entries: VecDeque<Entry>,
    /// A `ReceiveMessage` on this queue is running.
    pub(crate) polling: bool,
    /// The error of the last long poll, reported by the next `receive` of this queue.
    pub(crate) failure: Option<Error>,
}

/// One entry of a [`HeldQueue`], handed out in order by `receive`.
// Nearly every entry is a message: boxing it would cost an allocation per message to save
// the room of a rare error.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Entry {
    Message(Held),
    /// An undecodable message, already quarantined, still to be reported.
    Undecodable(Error),
}

/// A message claimed on SQS and held by this process.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) message: Message,
    /// The body as SQS holds it, for a dead letter to keep unchanged.
    pub(crate) body: String,
    pub(crate) queue: Arc<QueueInfo>,
    pub(crate) handle: String,
    pub(crate) leased_until: Instant,
}

/// A delivered message's queue and receipt handle, and until when its claim surely lasts.
///
/// SQS may accept an old receipt handle after the message was received again, so the driver
/// fences claims itself: past `leased_until`, the claim may belong to another worker, and
/// `ack`, `nack` and `extend` leave the message alone. `None` for a queue whose visibility
/// timeout is zero, where claims do not last at all.
#[derive(Debug)]
pub(crate) struct SqsReceipt {
    pub(crate) queue: Arc<QueueInfo>,
    /// The body as SQS holds it.
    pub(crate) body: String,
    pub(crate) handle: String,
    pub(crate) leased_until: Mutex<Option<Instant>>,
}

impl SqsReceipt {
    /// The receipt of `delivery`, when this driver made it.
    pub(crate) fn of(delivery: &Delivery) -> Result<&SqsReceipt, Error> {
        delivery.receipt().downcast::<SqsReceipt>(NAME)
    }

    /// Whether the claim surely still lasts (always, without a lease).
    pub(crate) fn holds(&self) -> bool {
        lock(&self.leased_until).is_none_or(|until| Instant::now() < until)
    }

    /// The receipt of `delivery` while its claim lasts, for settling it for good; `None` past
    /// the claim, when the message may be another worker's already and is left to run again,
    /// with a warning that it `settled` (a verb phrase) too late.
    pub(crate) fn lasting<'a>(
        delivery: &'a Delivery,
        settled: &str,
    ) -> Result<Option<&'a SqsReceipt>, Error> {
        let receipt = SqsReceipt::of(delivery)?;
        if receipt.holds() {
            return Ok(Some(receipt));
        }
        tracing::warn!(
            queue = %receipt.queue.name,
            "Message #{} {settled} after its claim ran out; it may run again",
            delivery.message().id()
        );
        Ok(None)
    }
}

/// Locks `mutex`, also when a thread panicked holding it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Core {
    pub(crate) fn new(
        client: Client,
        queue: &str,
        options: SqsOptions,
        serializer: Arc<dyn Serializer>,
        queues: PriorityQueues<String>,
    ) -> Self {
        Core {
            client,
            queue: queue.to_owned(),
            quarantine: quarantine_queue(queue),
            delay_queue: delay_queue(queue),
            next_forward: Mutex::new(Instant::now()),
            forwarding: AtomicBool::new(false),
            options,
            serializer,
            queues,
            resolved: Mutex::default(),
            state: Mutex::default(),
            changed: Notify::new(),
            trimming: AtomicBool::new(false),
        }
    }

    pub(crate) fn capabilities(&self) -> Capabilities {
        let mut capabilities = Capabilities::all();
        // Standard queues only: SQS does not keep their order.
        capabilities.fifo = false;
        capabilities.max_payload = Some(self.options.max_payload);
        capabilities
    }

    pub(crate) fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        validate_sqs_queue_name(name, MAX_QUEUE_NAME_LEN)?;
        self.queues.insert(priority, name.to_owned());
        Ok(())
    }

    /// What this process holds, by queue name.
    pub(crate) fn state(&self) -> MutexGuard<'_, HashMap<String, HeldQueue>> {
        lock(&self.state)
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        let held = drain(self.state.get_mut().unwrap_or_else(|e| e.into_inner()));
        if held.is_empty() {
            return;
        }
        // Give back what this process held, so it does not wait out its visibility timeout.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let client = self.client.clone();
            runtime.spawn(async move {
                if let Err(e) = give_back(&client, held).await {
                    tracing::warn!("Giving back held messages failed - {e}");
                }
            });
        }
    }
}

/// Takes every held message out of `state`; undecodable reports still held are logged.
pub(crate) fn drain(state: &mut HashMap<String, HeldQueue>) -> Vec<Held> {
    let mut held = Vec::new();
    for queue in state.values_mut() {
        for entry in queue.entries.drain(..) {
            match entry {
                Entry::Message(h) => held.push(h),
                Entry::Undecodable(error) => {
                    tracing::error!("Skipping undecodable message - {error}")
                }
            }
        }
        queue.failure = None;
    }
    held
}

/// Makes `held` messages visible again at once, ten per request.
pub(crate) async fn give_back(client: &Client, held: Vec<Held>) -> Result<(), Error> {
    let mut by_queue: HashMap<String, Vec<String>> = HashMap::new();
    for h in held {
        by_queue
            .entry(h.queue.url.clone())
            .or_default()
            .push(h.handle);
    }
    let mut first_error = None;
    for (url, handles) in by_queue {
        if let Err(e) = make_visible(client, &url, &handles).await {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}
