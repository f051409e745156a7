//! What the clones of a [`RabbitMqDriver`](crate::RabbitMqDriver) share: the broker's nodes,
//! the queues by priority, the options and the serializer, the session on the broker, and the
//! buffer of what the consumers delivered; with the receipt of a delivery and the small
//! helpers every job uses.

use std::collections::VecDeque;
use std::sync::Arc;

use hermes_core::driver::{Capabilities, Delivery, PriorityQueues, Receipt};
use hermes_core::{DecodeError, Error, Message, Priority, Serializer};
use lapin::Acker;
use tokio::sync::Notify;

use crate::amqp::{Nodes, Session, lock};
use crate::naming::validate_rabbitmq_queue_name;
use crate::{NAME, RabbitMqOptions};

/// The shared state of one driver and its clones.
pub(crate) struct Core {
    pub(crate) nodes: Nodes,
    /// The queue of the default priority.
    pub(crate) queue: String,
    pub(crate) options: RabbitMqOptions,
    pub(crate) serializer: Arc<dyn Serializer>,
    pub(crate) queues: PriorityQueues<String>,
    pub(crate) session: tokio::sync::Mutex<Option<Arc<Session>>>,
    pub(crate) buffer: Buffer,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitMqDriver")
            .field("url", &self.nodes)
            .field("queue", &self.queue)
            .field("options", &self.options)
            .field("queues", &self.queues)
            .finish_non_exhaustive()
    }
}

impl Core {
    pub(crate) fn new(
        nodes: Nodes,
        queue: &str,
        options: RabbitMqOptions,
        serializer: Arc<dyn Serializer>,
        queues: PriorityQueues<String>,
    ) -> Self {
        Core {
            nodes,
            queue: queue.to_owned(),
            options,
            serializer,
            queues,
            session: tokio::sync::Mutex::new(None),
            buffer: Buffer::default(),
        }
    }

    /// Everything but lease extension, which AMQP does not have: a consumer holds a message
    /// until it settles it or its connection closes.
    pub(crate) fn capabilities(&self) -> Capabilities {
        let mut capabilities = Capabilities::all();
        capabilities.extend = false;
        capabilities
    }

    pub(crate) fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        validate_rabbitmq_queue_name(name)?;
        self.queues.insert(priority, name.to_owned());
        Ok(())
    }

    /// The connected session, connecting (again) when there is none or it was lost.
    pub(crate) async fn session(&self) -> Result<Arc<Session>, Error> {
        let mut slot = self.session.lock().await;
        if let Some(session) = slot.as_ref()
            && session.alive()
        {
            return Ok(session.clone());
        }
        *slot = None;
        let session = Arc::new(self.nodes.connect(&self.options).await?);
        *slot = Some(session.clone());
        Ok(session)
    }
}

/// A delivered message's acknowledgement handle, and its body as delivered.
#[derive(Debug)]
pub(crate) struct RabbitReceipt {
    pub(crate) acker: Acker,
    /// The consumed queue it came from.
    pub(crate) queue: String,
    pub(crate) session: Arc<Session>,
    pub(crate) body: Vec<u8>,
}

impl RabbitReceipt {
    /// The receipt of `delivery`, when this driver made it.
    pub(crate) fn of(delivery: &Delivery) -> Result<&RabbitReceipt, Error> {
        delivery.receipt().downcast::<RabbitReceipt>(NAME)
    }
}

/// A consumed queue: a priority queue, or its long-delay queue.
#[derive(Debug, Clone)]
pub(crate) struct Consumed {
    pub(crate) priority: Priority,
    pub(crate) consumed: String,
    /// The priority queue its messages belong to.
    pub(crate) home: String,
}

/// One thing a consumer delivered.
// Nearly every entry is a message: boxing it would cost an allocation per delivery to make
// the rare undecodable entry smaller.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Buffered {
    /// A due message, unacknowledged on the broker.
    Message {
        priority: Priority,
        queue: String,
        message: Message,
        /// The body as delivered, for a dead letter.
        body: Vec<u8>,
        acker: Acker,
        session: Arc<Session>,
    },
    /// A body that could not be decoded; it was already quarantined or rejected.
    Undecodable {
        priority: Priority,
        quarantine: String,
        source: DecodeError,
    },
}

impl Buffered {
    fn priority(&self) -> Priority {
        match self {
            Buffered::Message { priority, .. } | Buffered::Undecodable { priority, .. } => {
                *priority
            }
        }
    }

    /// A message whose session is gone: the broker delivers it again on a new one.
    fn stale(&self) -> bool {
        matches!(self, Buffered::Message { session, .. } if !session.alive())
    }

    /// The delivery as `receive` returns it: a message with the receipt that settles it, or
    /// the error of an undecodable body.
    pub(crate) fn handed_out(self) -> Result<Delivery, Error> {
        match self {
            Buffered::Message {
                priority,
                queue,
                message,
                body,
                acker,
                session,
            } => Ok(Delivery::new(
                message,
                priority,
                Receipt::new(RabbitReceipt {
                    acker,
                    queue,
                    session,
                    body,
                }),
            )),
            Buffered::Undecodable {
                quarantine, source, ..
            } => Err(Error::Undecodable { quarantine, source }),
        }
    }
}

/// The deliveries the broker pushed to this process, oldest first, waiting for a `receive`;
/// and a wake-up for waiting receives.
#[derive(Debug, Default)]
pub(crate) struct Buffer {
    items: std::sync::Mutex<VecDeque<Buffered>>,
    pub(crate) arrived: Notify,
}

impl Buffer {
    /// Adds a delivery and wakes one waiting receive.
    pub(crate) fn push(&self, item: Buffered) {
        lock(&self.items).push_back(item);
        self.arrived.notify_one();
    }

    /// The highest priority among buffered deliveries of `selected` priorities, after dropping
    /// those of a lost session.
    pub(crate) fn best(&self, selected: &[Priority]) -> Option<Priority> {
        best_of(&mut lock(&self.items), selected)
    }

    /// Takes the oldest delivery of the highest buffered priority among `selected`.
    pub(crate) fn take(&self, selected: &[Priority]) -> Option<Buffered> {
        let mut items = lock(&self.items);
        let best = best_of(&mut items, selected)?;
        let index = items.iter().position(|item| item.priority() == best)?;
        items.remove(index)
    }

    /// Takes every delivery.
    pub(crate) fn drain(&self) -> Vec<Buffered> {
        lock(&self.items).drain(..).collect()
    }
}

/// The highest priority of `selected` in `items`, after dropping deliveries of a lost session.
fn best_of(items: &mut VecDeque<Buffered>, selected: &[Priority]) -> Option<Priority> {
    items.retain(|item| !item.stale());
    items
        .iter()
        .map(Buffered::priority)
        .filter(|p| selected.contains(p))
        .max()
}
