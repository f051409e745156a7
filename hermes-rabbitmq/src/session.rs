//! One connection to the broker: a channel for publishing (with confirms), a channel for
//! consuming, and what was declared and consumed on them.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use hermes_core::Error;
use lapin::options::{
    BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions, ExchangeBindOptions,
    ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ExchangeKind,
};

use crate::driver::NAME;
use crate::error::lapin_error;
use crate::ladder::{self, Trip, delay_level};

/// A running consumer: its tag, and the task moving its deliveries into the buffer.
#[derive(Debug)]
pub(crate) struct Consuming {
    pub(crate) tag: String,
    pub(crate) forwarder: tokio::task::JoinHandle<()>,
}

/// How long after an acknowledgement frees a full consumer's slot the broker's next delivery
/// of that queue is expected.
/// The longest one call to the broker may take, connecting included: a broker that takes the
/// connection but does not answer (frozen, or still starting) fails the call with a temporary
/// [`Error::Connection`] after this, and the next call connects anew.
pub const COMMAND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs `call` (`what`, for the error) for at most [`COMMAND_TIMEOUT`]; past that, gives up
/// `session` and fails with a temporary connection error.
pub(crate) async fn bounded<T>(
    what: &str,
    session: Option<&Session>,
    call: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(COMMAND_TIMEOUT, call).await {
        Ok(result) => result,
        Err(_) => {
            if let Some(session) = session {
                session.give_up();
            }
            Err(Error::Connection {
                driver: NAME,
                source: format!("{what}: no answer from the broker within {COMMAND_TIMEOUT:?}")
                    .into(),
            })
        }
    }
}

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
    /// Per target queue, how many levels of its delay ladder this session declared.
    ladders: Mutex<HashMap<String, usize>>,
    /// Every consumed queue's consumer. Held across starting a consumer, so two receives do
    /// not start the same one twice.
    pub(crate) consumers: tokio::sync::Mutex<HashMap<String, Consuming>>,
    /// The prefetch of each consumer.
    prefetch: usize,
    /// Per consumed queue, what this session holds of it.
    flows: Mutex<HashMap<String, Flow>>,
    /// Set when a call got no answer in time: the session is given up.
    broken: AtomicBool,
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
            ladders: Mutex::default(),
            consumers: tokio::sync::Mutex::default(),
            prefetch: usize::from(prefetch),
            flows: Mutex::default(),
            broken: AtomicBool::new(false),
        })
    }

    /// Gives the session up: it no longer counts as alive, so the next call connects anew
    /// (and the broker delivers this session's unacknowledged messages again once it closes).
    pub(crate) fn give_up(&self) {
        self.broken.store(true, Ordering::SeqCst);
    }

    /// Whether the connection and both channels are up.
    pub(crate) fn alive(&self) -> bool {
        !self.broken.load(Ordering::SeqCst)
            && self
                .connection
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
        self.publish_to("", queue, body, properties).await
    }

    /// Publishes `body` to `exchange` with `routing_key`, as mandatory, and waits for the
    /// broker's confirm; a message no queue took is an error.
    async fn publish_to(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<(), Error> {
        let options = BasicPublishOptions {
            mandatory: true,
            ..BasicPublishOptions::default()
        };
        let confirm = self
            .publisher
            .basic_publish(
                exchange.into(),
                routing_key.into(),
                options,
                body,
                properties,
            )
            .await
            .map_err(lapin_error)?
            .await
            .map_err(lapin_error)?;
        let target = if exchange.is_empty() {
            routing_key
        } else {
            exchange
        };
        match confirm {
            Confirmation::Nack(_) => Err(Error::driver(
                NAME,
                format!("the broker refused a message for {target}"),
                true,
            )),
            Confirmation::Ack(Some(_)) => Err(Error::driver(
                NAME,
                format!("no queue took a message sent to {target}"),
                true,
            )),
            _ => Ok(()),
        }
    }

    /// Publishes `body` down the delay ladder of `target` for `trip`; declares the levels it
    /// passes first.
    pub(crate) async fn publish_delayed(
        &self,
        target: &str,
        trip: Trip,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<(), Error> {
        let entry = trip.entry_level();
        self.declare_ladder(target, entry).await?;
        self.publish_to(
            &delay_level(target, entry),
            &trip.routing_key(),
            body,
            properties,
        )
        .await
    }

    /// Declares levels `0..=top` of the delay ladder of `target`, lowest first (a level binds
    /// to the one below it), once per session; before level 0, where the ladder ends.
    async fn declare_ladder(&self, target: &str, top: usize) -> Result<(), Error> {
        let done = lock(&self.ladders).get(target).copied().unwrap_or(0);
        if done == 0 {
            self.declare_arrival(target).await?;
        }
        for level in done..=top {
            self.declare_level(target, level).await?;
            let mut ladders = lock(&self.ladders);
            let declared = ladders.entry(target.to_owned()).or_default();
            *declared = (*declared).max(level + 1);
        }
        Ok(())
    }

    /// Declares a topic exchange called `name`.
    async fn declare_exchange(&self, name: &str) -> Result<(), Error> {
        let options = ExchangeDeclareOptions {
            durable: self.durable,
            ..ExchangeDeclareOptions::default()
        };
        self.publisher
            .exchange_declare(
                name.into(),
                ExchangeKind::Topic,
                options,
                FieldTable::default(),
            )
            .await
            .map_err(lapin_error)
    }

    /// Binds `queue` to `exchange` with `key`.
    async fn bind_queue(&self, queue: &str, exchange: &str, key: &str) -> Result<(), Error> {
        self.publisher
            .queue_bind(
                queue.into(),
                exchange.into(),
                key.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(lapin_error)
    }

    /// Declares where `target`'s ladder ends: the arrival exchange, bound to the target queue
    /// and to the long-delay queue.
    async fn declare_arrival(&self, target: &str) -> Result<(), Error> {
        let arrival = ladder::arrival_exchange(target);
        self.declare_exchange(&arrival).await?;
        let long = ladder::long_delay_queue(target);
        self.declare(&long, FieldTable::default()).await?;
        for (key, to_long) in ladder::arrival_keys() {
            let queue = if to_long { long.as_str() } else { target };
            self.bind_queue(queue, &arrival, key).await?;
        }
        Ok(())
    }

    /// Declares the exchange and the queue of one level of `target`'s ladder and their
    /// bindings: a one in the level's word to its queue, a zero on to the level below (from
    /// level 0: to the arrival exchange), where the queue also dead-letters to.
    async fn declare_level(&self, target: &str, level: usize) -> Result<(), Error> {
        let name = delay_level(target, level);
        self.declare_exchange(&name).await?;
        let below = if level == 0 {
            ladder::arrival_exchange(target)
        } else {
            delay_level(target, level - 1)
        };
        let mut arguments = FieldTable::default();
        let ttl = i64::try_from(ladder::level_ttl_ms(level)).unwrap_or(i64::MAX);
        arguments.insert("x-message-ttl".into(), AMQPValue::LongLongInt(ttl));
        arguments.insert(
            "x-dead-letter-exchange".into(),
            AMQPValue::LongString(below.as_str().into()),
        );
        self.declare(&name, arguments).await?;
        self.bind_queue(&name, &name, &ladder::binding_key(level, true))
            .await?;
        self.publisher
            .exchange_bind(
                below.as_str().into(),
                name.as_str().into(),
                ladder::binding_key(level, false).as_str().into(),
                ExchangeBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(lapin_error)
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
