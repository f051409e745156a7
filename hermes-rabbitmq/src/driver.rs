//! The RabbitMQ driver.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_core::time::{poll, unix_now};
use hermes_core::{
    Capabilities, DEFAULT_PRIORITY, Delivery, Driver, Error, JsonSerializer, Message, Priority,
    PriorityQueues, Receipt, Serializer, async_trait, validate_queue_name,
};
use lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicNackOptions, BasicPublishOptions, ConfirmSelectOptions,
    QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Acker, Channel, Confirmation, Connection, ConnectionProperties};

use crate::RabbitMqOptions;

pub(crate) const NAME: &str = "rabbitmq";

/// The delay queues' TTLs in milliseconds: a delayed message waits in the longest one that
/// does not pass its due time, and is delayed again until it is due.
pub const DELAY_LEVELS_MS: [u64; 12] = [
    10, 40, 160, 640, 2_560, 10_240, 40_960, 163_840, 655_360, 2_621_440, 10_485_760, 41_943_040,
];

/// The delay queue of `queue` whose messages wait `level_ms` milliseconds.
pub fn delay_queue(queue: &str, level_ms: u64) -> String {
    format!("{queue}.delay.{level_ms}")
}

/// The queue holding the undecodable messages of `queue`.
pub fn quarantine_queue(queue: &str) -> String {
    format!("{queue}.quarantine")
}

/// Every queue the driver may declare for the queue `queue`: itself, its delay queues and, for
/// the default queue, its quarantine.
pub fn queues_of(queue: &str) -> Vec<String> {
    let mut names = vec![queue.to_owned(), quarantine_queue(queue)];
    names.extend(DELAY_LEVELS_MS.iter().map(|l| delay_queue(queue, *l)));
    names
}

/// Hermes' RabbitMQ driver: one durable queue on the default exchange, declared without
/// arguments (an existing Hermes queue keeps working), persistent messages, manual
/// acknowledgements after the handlers, publisher confirms (a `send` that returned is on the
/// broker).
///
/// Beyond Hermes: delays of any length without a broker plugin (delay queues
/// `<queue>.delay.<ms>` with a TTL that dead-letter back to the queue; a message that comes back
/// before it is due is delayed again), one queue per priority (`setup_priority_queue`), taken
/// highest first, and reconnection after the broker restarts (unacknowledged messages are
/// delivered again by the broker). Undecodable bodies move to `<queue>.quarantine`.
///
/// Nothing connects until the first `send` or `receive`.
#[derive(Debug, Clone)]
pub struct RabbitMqDriver {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    url: String,
    queue: String,
    options: RabbitMqOptions,
    serializer: Arc<dyn Serializer>,
    queues: PriorityQueues<String>,
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    /// Messages taken from the broker for this process, not yet handed out.
    buffer: Mutex<VecDeque<Taken>>,
}

#[derive(Debug)]
struct Taken {
    priority: Priority,
    message: Message,
    acker: Acker,
    session: Arc<Session>,
}

/// One connection with a channel for publishing (with confirms) and one for taking messages.
struct Session {
    /// Taken when the session is dropped, to close it.
    connection: Option<Connection>,
    publisher: Channel,
    consumer: Channel,
    declared: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Closing the connection makes the broker deliver unacknowledged messages again.
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

/// A delivered message's acknowledgement handle.
#[derive(Debug)]
struct RabbitReceipt {
    acker: Acker,
    session: Arc<Session>,
}

fn lapin_error(error: lapin::Error) -> Error {
    let text = error.to_string();
    if text.contains("PRECONDITION_FAILED") {
        return Error::Config {
            driver: NAME,
            message: format!(
                "the broker refused a queue declaration ({text}); an existing queue with other \
                 settings (durable or not, arguments) must be deleted or used with matching options"
            ),
        };
    }
    Error::connection(NAME, error)
}

impl RabbitMqDriver {
    /// A driver for the queue `queue` (priority [`DEFAULT_PRIORITY`]) on the broker at `url`
    /// (`amqp://guest:guest@127.0.0.1:5672/%2f`). Nothing connects until first use.
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for an invalid queue name.
    pub fn new(url: &str, queue: &str, options: RabbitMqOptions) -> Result<Self, Error> {
        validate_queue_name(queue)?;
        Ok(RabbitMqDriver {
            inner: Arc::new(Inner {
                url: url.to_owned(),
                queue: queue.to_owned(),
                options,
                serializer: Arc::new(JsonSerializer),
                queues: PriorityQueues::with(DEFAULT_PRIORITY, queue.to_owned()),
                session: tokio::sync::Mutex::new(None),
                buffer: Mutex::default(),
            }),
        })
    }

    /// The queue holding undecodable messages.
    pub fn quarantine_queue(&self) -> String {
        quarantine_queue(&self.inner.queue)
    }

    /// The connected session, connecting (again) when there is none or it was lost.
    async fn session(&self) -> Result<Arc<Session>, Error> {
        let mut slot = self.inner.session.lock().await;
        if let Some(session) = slot.as_ref()
            && session
                .connection
                .as_ref()
                .is_some_and(|c| c.status().connected())
            && session.publisher.status().connected()
            && session.consumer.status().connected()
        {
            return Ok(session.clone());
        }
        *slot = None;
        let connection = Connection::connect(&self.inner.url, ConnectionProperties::default())
            .await
            .map_err(lapin_error)?;
        let publisher = connection.create_channel().await.map_err(lapin_error)?;
        publisher
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(lapin_error)?;
        let consumer = connection.create_channel().await.map_err(lapin_error)?;
        let session = Arc::new(Session {
            connection: Some(connection),
            publisher,
            consumer,
            declared: Mutex::default(),
        });
        *slot = Some(session.clone());
        Ok(session)
    }

    /// Declares `queue` once per session, with `arguments`.
    async fn declare(
        &self,
        session: &Session,
        queue: &str,
        arguments: FieldTable,
    ) -> Result<(), Error> {
        if session
            .declared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(queue)
        {
            return Ok(());
        }
        let options = QueueDeclareOptions {
            durable: self.inner.options.durable,
            ..QueueDeclareOptions::default()
        };
        session
            .publisher
            .queue_declare(queue.into(), options, arguments)
            .await
            .map_err(lapin_error)?;
        session
            .declared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(queue.to_owned());
        Ok(())
    }

    /// Publishes `body` to `queue` (declared plainly) and waits for the broker's confirm.
    async fn publish(&self, session: &Session, queue: &str, body: &[u8]) -> Result<(), Error> {
        let properties = &self.inner.options.properties;
        let mode = properties
            .delivery_mode()
            .unwrap_or(if self.inner.options.durable { 2 } else { 1 });
        let confirm = session
            .publisher
            .basic_publish(
                "".into(),
                queue.into(),
                BasicPublishOptions::default(),
                body,
                properties.clone().with_delivery_mode(mode),
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

    /// Puts `body`, due at `due`, on its way to `target`: into the target when due, else into
    /// the longest delay queue that does not pass the due time.
    async fn route(
        &self,
        session: &Session,
        target: &str,
        body: &[u8],
        due: Option<f64>,
    ) -> Result<(), Error> {
        let remaining_ms = due.map_or(0.0, |at| (at - unix_now()) * 1000.0);
        if remaining_ms <= 0.0 {
            self.declare(session, target, FieldTable::default()).await?;
            return self.publish(session, target, body).await;
        }
        let level = DELAY_LEVELS_MS
            .iter()
            .rev()
            .find(|l| (**l as f64) <= remaining_ms)
            .copied()
            .unwrap_or(DELAY_LEVELS_MS[0]);
        let delay_queue = delay_queue(target, level);
        let mut arguments = FieldTable::default();
        arguments.insert("x-message-ttl".into(), AMQPValue::LongLongInt(level as i64));
        arguments.insert(
            "x-dead-letter-exchange".into(),
            AMQPValue::LongString("".into()),
        );
        arguments.insert(
            "x-dead-letter-routing-key".into(),
            AMQPValue::LongString(target.into()),
        );
        // The target must exist for the dead-lettered message to land.
        self.declare(session, target, FieldTable::default()).await?;
        self.declare(session, &delay_queue, arguments).await?;
        self.publish(session, &delay_queue, body).await
    }

    /// Takes the next due message of `queues` into the buffer; returns whether one arrived.
    async fn take(&self, queues: &[(Priority, String)]) -> Result<bool, Error> {
        let session = self.session().await?;
        for (priority, queue) in queues {
            self.declare(&session, queue, FieldTable::default()).await?;
            loop {
                let got = session
                    .consumer
                    .basic_get(queue.as_str().into(), BasicGetOptions::default())
                    .await
                    .map_err(lapin_error)?;
                let Some(got) = got else { break };
                let delivery = got.delivery;
                let message = match self.inner.serializer.deserialize(&delivery.data) {
                    Ok(message) => message,
                    Err(source) => {
                        let quarantine = self.quarantine_queue();
                        self.declare(&session, &quarantine, FieldTable::default())
                            .await?;
                        self.publish(&session, &quarantine, &delivery.data).await?;
                        delivery
                            .acker
                            .ack(BasicAckOptions::default())
                            .await
                            .map_err(lapin_error)?;
                        return Err(Error::Undecodable {
                            quarantine: format!("the RabbitMQ queue {quarantine}"),
                            source,
                        });
                    }
                };
                if message.execute_at().is_some_and(|at| at > unix_now()) {
                    // Back from a delay queue before it is due: delay it again.
                    self.route(&session, queue, &delivery.data, message.execute_at())
                        .await?;
                    delivery
                        .acker
                        .ack(BasicAckOptions::default())
                        .await
                        .map_err(lapin_error)?;
                    continue;
                }
                self.buffer().push_back(Taken {
                    priority: *priority,
                    message,
                    acker: delivery.acker,
                    session: session.clone(),
                });
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn buffer(&self) -> std::sync::MutexGuard<'_, VecDeque<Taken>> {
        self.inner.buffer.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take_buffered(&self, priorities: &[Priority]) -> Option<Taken> {
        let mut buffer = self.buffer();
        let index = buffer
            .iter()
            .position(|t| priorities.is_empty() || priorities.contains(&t.priority))?;
        buffer.remove(index)
    }
}

#[async_trait]
impl Driver for RabbitMqDriver {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        let mut capabilities = Capabilities::all();
        capabilities.extend = false;
        capabilities
    }

    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        validate_queue_name(name)?;
        self.inner.queues.insert(priority, name.to_owned());
        Ok(())
    }

    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        let target = self.inner.queues.get(priority)?;
        let body = self.inner.serializer.serialize(message)?;
        let session = self.session().await?;
        self.route(&session, &target, &body, message.execute_at())
            .await
    }

    async fn receive(
        &self,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        let queues = self.inner.queues.selected(priorities)?;
        poll(wait, self.inner.options.refresh_interval, || async {
            loop {
                if let Some(taken) = self.take_buffered(priorities) {
                    let receipt = RabbitReceipt {
                        acker: taken.acker,
                        session: taken.session,
                    };
                    return Ok(Some(Delivery::new(
                        taken.message,
                        taken.priority,
                        Receipt::new(receipt),
                    )));
                }
                // In a task of its own, so a dropped `receive` leaves what it took in the
                // buffer.
                let driver = self.clone();
                let selected = queues.clone();
                let took = tokio::spawn(async move { driver.take(&selected).await })
                    .await
                    .map_err(|e| Error::driver(NAME, format!("take task: {e}"), true))??;
                if !took {
                    return Ok(None);
                }
            }
        })
        .await
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        let receipt = delivery.receipt().expect::<RabbitReceipt>(NAME)?;
        acknowledge(receipt, receipt.acker.ack(BasicAckOptions::default()).await)
    }

    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        let receipt = delivery.receipt().expect::<RabbitReceipt>(NAME)?;
        let options = BasicNackOptions {
            requeue: true,
            ..BasicNackOptions::default()
        };
        acknowledge(receipt, receipt.acker.nack(options).await)
    }
}

/// An acknowledgement whose channel is gone is not an error: the broker delivers the message
/// again.
fn acknowledge(receipt: &RabbitReceipt, result: Result<bool, lapin::Error>) -> Result<(), Error> {
    match result {
        Ok(_) => Ok(()),
        Err(_) if !receipt.session.consumer.status().connected() => {
            tracing::warn!(
                "The channel closed before the acknowledgement; the broker delivers the message again"
            );
            Ok(())
        }
        Err(e) => Err(lapin_error(e)),
    }
}
