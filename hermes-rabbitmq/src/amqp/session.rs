//! One connection to the broker: a channel for publishing (with confirms), a channel for
//! consuming, what was declared and consumed on them, and the calls the driver makes on them.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hermes_core::Error;
use hermes_core::driver::{CALL_TIMEOUT, bounded};
use lapin::options::{
    BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions, ExchangeBindOptions,
    ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ExchangeKind,
};

use super::{Flows, Ladders, Stores, lock};
use crate::error::lapin_error;
use crate::{NAME, QueueType};

/// A running consumer: its tag, and the task moving its deliveries into the buffer.
#[derive(Debug)]
pub(crate) struct Consuming {
    pub(crate) tag: String,
    pub(crate) forwarder: tokio::task::JoinHandle<()>,
}

/// One connection with its two channels. Dropping it closes the connection, which makes the
/// broker deliver this session's unacknowledged messages again.
pub(crate) struct Session {
    /// Taken when the session is dropped, to close it.
    connection: Option<Connection>,
    pub(crate) publisher: Channel,
    pub(crate) consumer: Channel,
    durable: bool,
    queue_type: QueueType,
    declared: Mutex<HashSet<String>>,
    /// The delay ladders this session declared.
    pub(crate) ladders: Ladders,
    /// The dead-letter queues this session declared, and who caps their length.
    pub(crate) dead_stores: Stores,
    /// Every consumed queue's consumer. Held across starting a consumer, so two receives do
    /// not start the same one twice.
    pub(crate) consumers: tokio::sync::Mutex<HashMap<String, Consuming>>,
    /// Per consumed queue, what this session holds of it.
    pub(crate) flows: Flows,
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
    /// Connects to `url`; the consuming channel gets a prefetch of `prefetch` per consumer,
    /// and every queue is declared `durable` or not, of `queue_type`.
    pub(crate) async fn open(
        url: &str,
        durable: bool,
        queue_type: QueueType,
        prefetch: u16,
    ) -> Result<Self, Error> {
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
            queue_type,
            declared: Mutex::default(),
            ladders: Ladders::default(),
            dead_stores: Stores::default(),
            consumers: tokio::sync::Mutex::default(),
            flows: Flows::new(usize::from(prefetch)),
            broken: AtomicBool::new(false),
        })
    }

    /// Gives the session up: it no longer counts as alive, so the next call connects anew
    /// (and the broker delivers this session's unacknowledged messages again once it closes).
    pub(crate) fn give_up(&self) {
        self.broken.store(true, Ordering::SeqCst);
    }

    /// Runs `call` on this session (`what`, for the error) for at most [`CALL_TIMEOUT`]; past
    /// that, gives the session up and fails with a temporary [`Error::Connection`]: a broker
    /// that took the connection but does not answer (frozen, or still starting) is not waited
    /// for, and the next call connects anew.
    ///
    /// # Cancellation safety
    /// As cancel safe as `call`.
    pub(crate) async fn bounded<T>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        let mut answered = false;
        let call = async {
            let result = call.await;
            answered = true;
            result
        };
        let result = bounded(NAME, what, CALL_TIMEOUT, call).await;
        if !answered {
            self.give_up();
        }
        result
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

    /// A new channel on the session's connection, for an inspection of its own (see the
    /// `scratch` module).
    pub(crate) async fn channel(&self) -> Result<Channel, Error> {
        let connection = self.connection.as_ref().ok_or_else(|| Error::Connection {
            driver: NAME,
            source: "the connection is closed".into(),
        })?;
        connection.create_channel().await.map_err(lapin_error)
    }

    /// Declares `queue` with `arguments`, once per session.
    pub(crate) async fn declare(&self, queue: &str, arguments: FieldTable) -> Result<(), Error> {
        if lock(&self.declared).contains(queue) {
            return Ok(());
        }
        self.ready(queue, arguments).await?;
        lock(&self.declared).insert(queue.to_owned());
        Ok(())
    }

    /// `arguments` with the session's queue type (none for a classic queue, as Hermes
    /// declares).
    pub(crate) fn typed(&self, mut arguments: FieldTable) -> FieldTable {
        if self.queue_type != QueueType::Classic {
            arguments.insert(
                "x-queue-type".into(),
                AMQPValue::LongString(self.queue_type.as_str().into()),
            );
        }
        arguments
    }

    /// The queue type of this session's queues.
    pub(crate) fn queue_type(&self) -> QueueType {
        self.queue_type
    }

    /// Declares `queue` with `arguments` (it exists afterwards) and returns how many messages
    /// wait in it, ready for delivery.
    pub(crate) async fn ready(&self, queue: &str, arguments: FieldTable) -> Result<u32, Error> {
        let options = QueueDeclareOptions {
            durable: self.durable,
            ..QueueDeclareOptions::default()
        };
        let declared = self
            .publisher
            .queue_declare(queue.into(), options, self.typed(arguments))
            .await
            .map_err(lapin_error)?;
        Ok(declared.message_count())
    }

    /// How many messages wait in the consumed `queue`, asked on the consumer channel: every
    /// delivery the broker made to this session's consumers before it answered has reached
    /// the connection by the time the answer does (one channel's frames keep their order), so
    /// a count of 0 means nothing more of `queue` is on its way but what the consumers'
    /// forwarders are filing.
    pub(crate) async fn ready_behind_deliveries(&self, queue: &str) -> Result<u32, Error> {
        let options = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let declared = self
            .consumer
            .queue_declare(queue.into(), options, FieldTable::default())
            .await
            .map_err(lapin_error)?;
        Ok(declared.message_count())
    }

    /// Publishes `body` to `queue` on the default exchange, as mandatory, and waits for the
    /// broker's confirm, publishing again while the broker refuses it (see
    /// [`again_while_refused`]); a message no queue took is an error.
    pub(crate) async fn publish(
        &self,
        queue: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<(), Error> {
        again_while_refused(|| self.start_publish("", queue, body, properties.clone())).await
    }

    /// Publishes `body` to `exchange` with `routing_key`, as mandatory, without waiting for
    /// the broker's confirm: the messages of one session reach the broker in the order they
    /// were published, and [`Published::confirmed`] waits for each one's confirm.
    pub(crate) async fn start_publish(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<Published, Error> {
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
            .map_err(lapin_error)?;
        let target = if exchange.is_empty() {
            routing_key
        } else {
            exchange
        };
        Ok(Published {
            confirm,
            target: target.to_owned(),
        })
    }

    /// Declares a topic exchange called `name`.
    pub(crate) async fn declare_exchange(&self, name: &str) -> Result<(), Error> {
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
    pub(crate) async fn bind_queue(
        &self,
        queue: &str,
        exchange: &str,
        key: &str,
    ) -> Result<(), Error> {
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

    /// Binds the exchange `destination` to the exchange `source` with `key`.
    pub(crate) async fn bind_exchange(
        &self,
        destination: &str,
        source: &str,
        key: &str,
    ) -> Result<(), Error> {
        self.publisher
            .exchange_bind(
                destination.into(),
                source.into(),
                key.into(),
                ExchangeBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(lapin_error)
    }
}

/// A message the broker has been sent, whose confirm is still to come.
pub(crate) struct Published {
    confirm: lapin::PublisherConfirm,
    target: String,
}

impl Published {
    /// Waits for the broker's confirm: an error when it refused the message (a nack) or no
    /// queue took it (returned as mandatory), for this message alone.
    pub(crate) async fn confirmed(self) -> Result<(), Error> {
        match self.answer().await? {
            Answer::Taken => Ok(()),
            Answer::Refused(error) => Err(error),
        }
    }

    /// Waits for the broker's confirm and tells a message it took from one it refused (a
    /// nack, which publishing again may mend); a message no queue took is an error.
    pub(crate) async fn answer(self) -> Result<Answer, Error> {
        let target = self.target;
        match self.confirm.await.map_err(lapin_error)? {
            Confirmation::Nack(_) => Ok(Answer::Refused(Error::driver(
                NAME,
                format!("the broker refused a message for {target}"),
                true,
            ))),
            Confirmation::Ack(Some(_)) => Err(Error::driver(
                NAME,
                format!("no queue took a message sent to {target}"),
                true,
            )),
            _ => Ok(Answer::Taken),
        }
    }
}

/// The broker's answer to a published message.
pub(crate) enum Answer {
    /// The broker took the message.
    Taken,
    /// The broker refused the message (a nack): the error to give when it keeps refusing.
    Refused(Error),
}

/// How many times a message the broker refuses is published in all.
const PUBLISH_ATTEMPTS: u32 = 4;

/// The pause before the second publish of a refused message, doubled before each next one.
const REFUSED_PAUSE: Duration = Duration::from_millis(50);

/// Publishes with `publish` until the broker takes the message, up to [`PUBLISH_ATTEMPTS`]
/// times with a growing pause between them. A broker refuses a message (a nack) when the queue
/// cannot take it for now, as a quorum queue may while it elects a leader. The broker's
/// promise for a refused message is that it may not be in the queue: publishing it again
/// loses nothing, and at worst delivers it twice, which at-least-once delivery allows.
pub(crate) async fn again_while_refused<F, P>(mut publish: F) -> Result<(), Error>
where
    F: FnMut() -> P,
    P: Future<Output = Result<Published, Error>>,
{
    let mut pause = REFUSED_PAUSE;
    for _ in 1..PUBLISH_ATTEMPTS {
        match publish().await?.answer().await? {
            Answer::Taken => return Ok(()),
            Answer::Refused(_) => {
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
        }
    }
    publish().await?.confirmed().await
}
