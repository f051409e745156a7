//! One connection to the broker: a channel for publishing (with confirms), a channel for
//! consuming, and what was declared and consumed on them.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;

use hermes_core::Error;
use lapin::options::{
    BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties};

use crate::driver::NAME;
use crate::error::lapin_error;

/// A running consumer: its tag, and the task moving its deliveries into the buffer.
#[derive(Debug)]
pub(crate) struct Consuming {
    pub(crate) tag: String,
    pub(crate) forwarder: tokio::task::JoinHandle<()>,
}

/// How long after an acknowledgement frees a full consumer's slot the broker's next delivery
/// of that queue is expected.
const REFILL_WINDOW: std::time::Duration = std::time::Duration::from_millis(50);

/// What a session holds of one queue.
#[derive(Debug, Default)]
struct Flow {
    /// Messages delivered and not yet acknowledged.
    unacked: usize,
    /// Set when an acknowledgement freed a slot of a full consumer: until then the broker may
    /// be sending the next message.
    refill_until: Option<Instant>,
}

/// One connection with its two channels. Dropping it closes the connection, which makes the
/// broker deliver this session's unacknowledged messages again.
pub(crate) struct Session {
    /// Taken when the session is dropped, to close it.
    connection: Option<Connection>,
    pub(crate) publisher: Channel,
    pub(crate) consumer: Channel,
    durable: bool,
    declared: Mutex<HashSet<String>>,
    /// Every consumed queue's consumer. Held across starting a consumer, so two receives do
    /// not start the same one twice.
    pub(crate) consumers: tokio::sync::Mutex<HashMap<String, Consuming>>,
    /// The prefetch of each consumer.
    prefetch: usize,
    /// Per consumed queue, what this session holds of it.
    flows: Mutex<HashMap<String, Flow>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("alive", &self.alive())
            .finish_non_exhaustive()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let (Ok(runtime), Some(connection)) = (
            tokio::runtime::Handle::try_current(),
            self.connection.take(),
        ) {
            runtime.spawn(async move {
                let _ = connection.close(200, "bye".into()).await;
            });
        }
    }
}

impl Session {
    /// Connects to `url`; the consuming channel gets a prefetch of `prefetch` per consumer.
    pub(crate) async fn open(url: &str, durable: bool, prefetch: u16) -> Result<Self, Error> {
        let connection = Connection::connect(url, ConnectionProperties::default())
            .await
            .map_err(lapin_error)?;
        let publisher = connection.create_channel().await.map_err(lapin_error)?;
        publisher
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(lapin_error)?;
        let consumer = connection.create_channel().await.map_err(lapin_error)?;
        consumer
            .basic_qos(prefetch, BasicQosOptions::default())
            .await
            .map_err(lapin_error)?;
        Ok(Session {
            connection: Some(connection),
            publisher,
            consumer,
            durable,
            declared: Mutex::default(),
            consumers: tokio::sync::Mutex::default(),
            prefetch: usize::from(prefetch),
            flows: Mutex::default(),
        })
    }

    /// Whether the connection and both channels are up.
    pub(crate) fn alive(&self) -> bool {
        self.connection
            .as_ref()
            .is_some_and(|c| c.status().connected())
            && self.publisher.status().connected()
            && self.consumer.status().connected()
    }

    /// Declares `queue` with `arguments`, once per session.
    pub(crate) async fn declare(&self, queue: &str, arguments: FieldTable) -> Result<(), Error> {
        if lock(&self.declared).contains(queue) {
            return Ok(());
        }
        self.declare_now(queue, arguments).await?;
        lock(&self.declared).insert(queue.to_owned());
        Ok(())
    }

    /// Declares `queue` without arguments (it exists afterwards) and returns how many messages
    /// wait in it, ready for delivery.
    pub(crate) async fn ready(&self, queue: &str) -> Result<u32, Error> {
        self.declare_now(queue, FieldTable::default()).await
    }

    async fn declare_now(&self, queue: &str, arguments: FieldTable) -> Result<u32, Error> {
        let options = QueueDeclareOptions {
            durable: self.durable,
            ..QueueDeclareOptions::default()
        };
        let declared = self
            .publisher
            .queue_declare(queue.into(), options, arguments)
            .await
            .map_err(lapin_error)?;
        Ok(declared.message_count())
    }

    /// Publishes `body` to `queue` on the default exchange and waits for the broker's confirm.
    pub(crate) async fn publish(
        &self,
        queue: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<(), Error> {
        let confirm = self
            .publisher
            .basic_publish(
                "".into(),
                queue.into(),
                BasicPublishOptions::default(),
                body,
                properties,
            )
            .await
            .map_err(lapin_error)?
            .await
            .map_err(lapin_error)?;
        match confirm {
            Confirmation::Nack(_) => Err(Error::driver(
                NAME,
                format!("the broker refused a message for {queue}"),
                true,
            )),
            _ => Ok(()),
        }
    }

    /// Counts a message of `queue` delivered to this session.
    pub(crate) fn delivered(&self, queue: &str) {
        let mut flows = lock(&self.flows);
        let flow = flows.entry(queue.to_owned()).or_default();
        flow.unacked += 1;
        flow.refill_until = None;
    }

    /// Counts a message of `queue` acknowledged (or given back).
    pub(crate) fn settled(&self, queue: &str) {
        if let Some(flow) = lock(&self.flows).get_mut(queue) {
            if flow.unacked >= self.prefetch {
                flow.refill_until = Some(Instant::now() + REFILL_WINDOW);
            }
            flow.unacked = flow.unacked.saturating_sub(1);
        }
    }

    /// Whether the broker may be about to deliver a message of `queue`: an acknowledgement just
    /// freed a slot of its full consumer.
    pub(crate) fn refill_expected(&self, queue: &str) -> bool {
        lock(&self.flows)
            .get(queue)
            .and_then(|f| f.refill_until)
            .is_some_and(|until| Instant::now() < until)
    }

    /// Whether the consumer of `queue` can take another message.
    pub(crate) fn has_room(&self, queue: &str) -> bool {
        lock(&self.flows)
            .get(queue)
            .is_none_or(|f| f.unacked < self.prefetch)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
