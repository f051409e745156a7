//! The RabbitMQ driver.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use hermes_core::time::unix_now;
use hermes_core::{
    Capabilities, DEFAULT_PRIORITY, Delivery, Driver, Error, JsonSerializer, Priority,
    PriorityQueues, Receipt, Serializer, async_trait, validate_queue_name,
};
use lapin::options::{BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions};
use lapin::types::FieldTable;
use lapin::{Acker, BasicProperties, Consumer};
use tokio::time::Instant;

use crate::buffer::{Buffer, Buffered};
use crate::error::lapin_error;
use crate::ladder::{DELAY_LEVELS, Trip, arrival_exchange, delay_level, long_delay_queue};
use crate::session::{COMMAND_TIMEOUT, Consuming, Session, bounded};
use crate::{RabbitMqOptions, UndecodableAction};

pub(crate) const NAME: &str = "rabbitmq";

/// The TTLs in milliseconds of the delay queues `<queue>.delay.<ms>` of earlier versions, which
/// dead-letter straight into the queue: messages still in them arrive early and are delayed
/// again by the consumer. New delays go through the ladder (see [`delay_level`]).
pub const LEGACY_DELAY_LEVELS_MS: [u64; 12] = [
    10, 40, 160, 640, 2_560, 10_240, 40_960, 163_840, 655_360, 2_621_440, 10_485_760, 41_943_040,
];

/// How long a `receive` holding a lower-priority message waits for a higher-priority one the
/// broker is about to deliver.
const HIGHER_PRIORITY_PATIENCE: Duration = Duration::from_millis(250);

/// How long `flush` waits for a cancelled consumer's last deliveries.
const FORWARDER_END: Duration = Duration::from_secs(5);

/// The delay queue of earlier versions for `queue` whose messages waited `level_ms`
/// milliseconds.
pub fn legacy_delay_queue(queue: &str, level_ms: u64) -> String {
    format!("{queue}.delay.{level_ms}")
}

/// The queue holding the undecodable messages of `queue`.
pub fn quarantine_queue(queue: &str) -> String {
    format!("{queue}.quarantine")
}

/// Every queue the driver may declare for the queue `queue` (itself, the levels of its delay
/// ladder, its quarantine), and the delay queues earlier versions declared.
pub fn queues_of(queue: &str) -> Vec<String> {
    let mut names = vec![
        queue.to_owned(),
        quarantine_queue(queue),
        long_delay_queue(queue),
    ];
    names.extend((0..DELAY_LEVELS).map(|l| delay_level(queue, l)));
    names.extend(
        LEGACY_DELAY_LEVELS_MS
            .iter()
            .map(|l| legacy_delay_queue(queue, *l)),
    );
    names
}

/// Every exchange the driver may declare for the queue `queue`: the levels of its delay ladder
/// and the exchange it ends in.
pub fn exchanges_of(queue: &str) -> Vec<String> {
    let mut names: Vec<String> = (0..DELAY_LEVELS).map(|l| delay_level(queue, l)).collect();
    names.push(arrival_exchange(queue));
    names
}

/// Hermes' RabbitMQ driver: one durable queue on the default exchange, declared without
/// arguments (an existing Hermes queue keeps working), persistent messages, consumed with a
/// `basic.qos` prefetch (default 1) and acknowledged after the handlers; publisher confirms (a
/// `send` that returned is on the broker).
///
/// Beyond Hermes: delays of any length without a broker plugin (delay queues
/// `<queue>.delay.<ms>` with a TTL that dead-letter back to the queue; a message that comes back
/// before it is due is delayed again), one queue per priority (`setup_priority_queue`), taken
/// highest first, and reconnection after the broker restarts (unacknowledged messages are
/// delivered again by the broker). Undecodable bodies move to `<queue>.quarantine`, or are
/// rejected as in Hermes (see [`UndecodableAction`]).
///
/// Nothing connects until the first `send` or `receive`. A `receive` starts one consumer per
/// selected queue; they keep running (holding up to `prefetch` messages each) until
/// [`Driver::flush`] or until the driver is dropped, which gives their messages back.
#[derive(Debug, Clone)]
pub struct RabbitMqDriver {
    inner: Arc<Inner>,
}

struct Inner {
    url: String,
    queue: String,
    options: RabbitMqOptions,
    serializer: Arc<dyn Serializer>,
    queues: PriorityQueues<String>,
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    buffer: Buffer,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitMqDriver")
            .field("url", &redact_url(&self.url))
            .field("queue", &self.queue)
            .field("options", &self.options)
            .field("queues", &self.queues)
            .finish_non_exhaustive()
    }
}

/// `url` with the password of its user information replaced by `***`.
fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // The last '@' ends the user information, even when the password holds '/' or '@'.
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
    let hidden = if userinfo.contains(':') { ":***" } else { "" };
    format!("{scheme}://{user}{hidden}@{host}")
}

/// Checks a queue name for RabbitMQ: Hermes' rules, and not `amq.`, which the broker keeps for
/// itself.
fn validate_rabbitmq_queue_name(name: &str) -> Result<(), Error> {
    validate_queue_name(name)?;
    if name.starts_with("amq.") {
        return Err(Error::InvalidQueueName {
            name: hermes_core::excerpt(name),
            reason: "RabbitMQ keeps names starting with 'amq.' for itself",
        });
    }
    Ok(())
}

/// A delivered message's acknowledgement handle.
#[derive(Debug)]
struct RabbitReceipt {
    acker: Acker,
    queue: String,
    session: Arc<Session>,
}

/// What a look at the buffer found.
enum Pick {
    Found(Result<Delivery, Error>),
    /// Only lower-priority messages, while a higher-priority one is on its way.
    HigherComing,
    Nothing,
}

impl RabbitMqDriver {
    /// A driver for the queue `queue` (priority [`DEFAULT_PRIORITY`]) on the broker at `url`
    /// (`amqp://guest:guest@127.0.0.1:5672/%2f`). Nothing connects until first use.
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for an invalid queue name (RabbitMQ also refuses names
    /// starting with `amq.`); [`Error::Config`] for a prefetch of 0, an empty consumer tag, or
    /// properties with an expiration.
    pub fn new(url: &str, queue: &str, options: RabbitMqOptions) -> Result<Self, Error> {
        validate_rabbitmq_queue_name(queue)?;
        if options.prefetch == 0 {
            return Err(config_error("the prefetch must be at least 1"));
        }
        if options.consumer_tag.is_empty() || options.consumer_tag.len() > 200 {
            return Err(config_error("the consumer tag must be 1 to 200 bytes long"));
        }
        if options.properties.expiration().is_some() {
            return Err(config_error(
                "the properties must not set an expiration: a per-message TTL would let a \
                 delayed message out of the delay queues before it is due",
            ));
        }
        let queues = PriorityQueues::with(DEFAULT_PRIORITY, queue.to_owned());
        Ok(RabbitMqDriver::build(
            url,
            queue,
            options,
            Arc::new(JsonSerializer),
            queues,
        ))
    }

    fn build(
        url: &str,
        queue: &str,
        options: RabbitMqOptions,
        serializer: Arc<dyn Serializer>,
        queues: PriorityQueues<String>,
    ) -> Self {
        RabbitMqDriver {
            inner: Arc::new(Inner {
                url: url.to_owned(),
                queue: queue.to_owned(),
                options,
                serializer,
                queues,
                session: tokio::sync::Mutex::new(None),
                buffer: Buffer::default(),
            }),
        }
    }

    /// The same queues with `serializer` instead of [`JsonSerializer`], as a new instance (with
    /// a connection of its own). A PHP process sharing the queue reads only Hermes' JSON.
    ///
    /// ```
    /// use hermes_core::JsonSerializer;
    /// use hermes_rabbitmq::{RabbitMqDriver, RabbitMqOptions};
    ///
    /// let driver = RabbitMqDriver::new("amqp://127.0.0.1:5672/%2f", "hermes", RabbitMqOptions::default())?
    ///     .with_serializer(JsonSerializer);
    /// # Ok::<(), hermes_core::Error>(())
    /// ```
    #[must_use]
    pub fn with_serializer(self, serializer: impl Serializer) -> Self {
        RabbitMqDriver::build(
            &self.inner.url,
            &self.inner.queue,
            self.inner.options.clone(),
            Arc::new(serializer),
            self.inner.queues.clone(),
        )
    }

    /// The queue holding undecodable messages.
    pub fn quarantine_queue(&self) -> String {
        quarantine_queue(&self.inner.queue)
    }

    /// The connected session, connecting (again) when there is none or it was lost.
    async fn session(&self) -> Result<Arc<Session>, Error> {
        let mut slot = self.inner.session.lock().await;
        if let Some(session) = slot.as_ref()
            && session.alive()
        {
            return Ok(session.clone());
        }
        *slot = None;
        let options = &self.inner.options;
        let open = Session::open(&self.inner.url, options.durable, options.prefetch);
        let session = Arc::new(bounded("connecting", None, open).await?);
        *slot = Some(session.clone());
        Ok(session)
    }

    /// The properties of a published message: the user's, with a delivery mode.
    fn properties(&self) -> BasicProperties {
        let options = &self.inner.options;
        let mode = options
            .properties
            .delivery_mode()
            .unwrap_or(if options.durable { 2 } else { 1 });
        options.properties.clone().with_delivery_mode(mode)
    }

    /// Puts `body`, due at `due`, on its way to `target`: into the target when due, else into
    /// the target's delay ladder, which lets it into the target when due (see [`delay_level`]).
    async fn route(
        &self,
        session: &Session,
        target: &str,
        body: &[u8],
        due: Option<f64>,
    ) -> Result<(), Error> {
        // The target must exist, also for a delayed message to land when dead-lettered.
        session.declare(target, FieldTable::default()).await?;
        let remaining_ms = due.map_or(0.0, |at| (at - unix_now()) * 1000.0);
        if remaining_ms <= 0.0 {
            return session.publish(target, body, self.properties()).await;
        }
        session
            .publish_delayed(
                target,
                Trip::for_delay(remaining_ms),
                body,
                self.properties(),
            )
            .await
    }

    /// The consumer tag for `queue`.
    fn consumer_tag(&self, queue: &str) -> String {
        let tag = &self.inner.options.consumer_tag;
        if queue == self.inner.queue {
            tag.clone()
        } else {
            format!("{tag}.{queue}")
        }
    }

    /// Makes sure `session` consumes every queue of `queues`, and the long-delay queue of each
    /// (where messages delayed longer than the ladder holds wait for a worker to send them on).
    ///
    /// A consumer is started in a task of its own, so a dropped `receive` never leaves a
    /// consumer on the broker without its forwarder.
    async fn consume(
        &self,
        session: &Arc<Session>,
        queues: &[(Priority, String)],
    ) -> Result<(), Error> {
        let wanted: Vec<Consumed> = queues
            .iter()
            .flat_map(|(priority, queue)| {
                [queue.clone(), long_delay_queue(queue)].map(|consumed| Consumed {
                    priority: *priority,
                    consumed,
                    home: queue.clone(),
                })
            })
            .collect();
        {
            let consumers = session.consumers.lock().await;
            if wanted.iter().all(|c| consumers.contains_key(&c.consumed)) {
                return Ok(());
            }
        }
        let driver = self.clone();
        let session = session.clone();
        hermes_core::task::detached(async move { driver.start_consumers(&session, wanted).await })
            .await
    }

    async fn start_consumers(
        &self,
        session: &Arc<Session>,
        wanted: Vec<Consumed>,
    ) -> Result<(), Error> {
        let mut consumers = session.consumers.lock().await;
        for consumed in wanted {
            let queue = &consumed.consumed;
            if consumers.contains_key(queue) {
                continue;
            }
            session.declare(queue, FieldTable::default()).await?;
            let tag = self.consumer_tag(queue);
            let consumer = session
                .consumer
                .basic_consume(
                    queue.as_str().into(),
                    tag.as_str().into(),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await
                .map_err(lapin_error)?;
            let name = queue.clone();
            let forwarder = tokio::spawn(forward(
                Arc::downgrade(&self.inner),
                Arc::downgrade(session),
                consumed,
                consumer,
            ));
            consumers.insert(name, Consuming { tag, forwarder });
        }
        Ok(())
    }

    /// Files one delivery: a due message goes to the buffer; an early one is delayed again
    /// (down its home queue's ladder); an undecodable one is quarantined or rejected and
    /// reported.
    async fn accept(
        &self,
        session: &Arc<Session>,
        from: &Consumed,
        delivery: lapin::message::Delivery,
    ) -> Result<(), Error> {
        let (queue, home, priority) = (from.consumed.as_str(), from.home.as_str(), from.priority);
        let message = match self.inner.serializer.deserialize(&delivery.data) {
            Ok(message) => message,
            Err(source) => {
                let kept = match self.inner.options.undecodable {
                    UndecodableAction::Reject => format!(
                        "nowhere: rejected from the RabbitMQ queue {queue}, kept only by its \
                         dead-letter policy"
                    ),
                    _ => {
                        let quarantine = quarantine_queue(home);
                        session.declare(&quarantine, FieldTable::default()).await?;
                        session
                            .publish(&quarantine, &delivery.data, self.properties())
                            .await?;
                        format!("the RabbitMQ queue {quarantine}")
                    }
                };
                // Rejected without requeue, as Hermes does: a dead-letter policy on the queue
                // gets it too.
                let reject = BasicNackOptions {
                    requeue: false,
                    ..BasicNackOptions::default()
                };
                delivery.acker.nack(reject).await.map_err(lapin_error)?;
                self.inner.buffer.push(Buffered::Undecodable {
                    priority,
                    quarantine: kept,
                    source,
                });
                return Ok(());
            }
        };
        if message.execute_at().is_some_and(|at| at > unix_now()) {
            // Not due yet (put on the queue directly, back from a delay queue of earlier
            // versions, or a long delay's stop on the way): delay it again.
            self.route(session, home, &delivery.data, message.execute_at())
                .await?;
            return delivery
                .acker
                .ack(BasicAckOptions::default())
                .await
                .map(drop)
                .map_err(lapin_error);
        }
        session.delivered(queue);
        self.inner.buffer.push(Buffered::Message {
            priority,
            queue: queue.to_owned(),
            message,
            acker: delivery.acker,
            session: session.clone(),
        });
        Ok(())
    }

    /// Takes the best buffered delivery of `queues`. When `patient`, a lower-priority message
    /// is not taken while a higher-priority queue has messages its consumer is about to get:
    /// ready ones it has room for, or the one the broker sends after an acknowledgement freed
    /// a slot of its full consumer.
    async fn pick(
        &self,
        session: &Session,
        queues: &[(Priority, String)],
        patient: bool,
    ) -> Result<Pick, Error> {
        let selected: Vec<Priority> = queues.iter().map(|(p, _)| *p).collect();
        let Some(best) = self.inner.buffer.best(&selected) else {
            return Ok(Pick::Nothing);
        };
        if patient {
            for (_, queue) in queues.iter().filter(|(p, _)| *p > best) {
                if session.refill_expected(queue)
                    || (session.has_room(queue) && session.ready(queue).await? > 0)
                {
                    return Ok(Pick::HigherComing);
                }
            }
        }
        let Some(item) = self.inner.buffer.take(&selected) else {
            return Ok(Pick::Nothing);
        };
        Ok(Pick::Found(match item {
            Buffered::Message {
                priority,
                queue,
                message,
                acker,
                session,
            } => Ok(Delivery::new(
                message,
                priority,
                Receipt::new(RabbitReceipt {
                    acker,
                    queue,
                    session,
                }),
            )),
            Buffered::Undecodable {
                quarantine, source, ..
            } => Err(Error::Undecodable { quarantine, source }),
        }))
    }

    /// Settles `delivery` with `settle` (ack or nack).
    async fn settle(
        &self,
        delivery: &Delivery,
        settle: impl AsyncFnOnce(&Acker) -> Result<(), lapin::Error>,
    ) -> Result<(), Error> {
        let receipt = delivery.receipt().downcast::<RabbitReceipt>(NAME)?;
        let result = tokio::time::timeout(COMMAND_TIMEOUT, settle(&receipt.acker)).await;
        if result.is_err() {
            receipt.session.give_up();
        }
        // A broker that does not take the acknowledgement in time: the session is given up, and
        // closing it makes the broker deliver the message again.
        let result = result.unwrap_or_else(|_| {
            let timed_out = std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer");
            Err(lapin::Error::from(timed_out))
        });
        receipt.session.settled(&receipt.queue);
        match result {
            Ok(()) => Ok(()),
            // The channel is gone: the broker delivers the message again.
            Err(_) if !receipt.session.alive() => {
                tracing::warn!(
                    "The channel closed before the acknowledgement; the broker delivers the message again"
                );
                Ok(())
            }
            Err(e) => Err(lapin_error(e)),
        }
    }
}

fn config_error(message: &str) -> Error {
    Error::Config {
        driver: NAME,
        message: message.to_owned(),
    }
}

/// A consumed queue: a priority queue, or its long-delay queue.
#[derive(Debug, Clone)]
struct Consumed {
    priority: Priority,
    consumed: String,
    /// The priority queue its messages belong to.
    home: String,
}

/// Moves the deliveries of one consumer into the driver's buffer until the consumer ends (its
/// channel closed or it was cancelled) or the driver is dropped.
async fn forward(
    inner: Weak<Inner>,
    session: Weak<Session>,
    from: Consumed,
    mut consumer: Consumer,
) {
    while let Some(Ok(delivery)) = consumer.next().await {
        let (Some(inner), Some(session)) = (inner.upgrade(), session.upgrade()) else {
            break;
        };
        let driver = RabbitMqDriver { inner };
        if let Err(error) = driver.accept(&session, &from, delivery).await {
            // Left unacknowledged: the broker delivers it again on the next session.
            tracing::warn!(
                "A delivery from {} could not be filed: {error}",
                from.consumed
            );
        }
    }
    if let Some(inner) = inner.upgrade() {
        // Waiting receives look at the connection again.
        inner.buffer.arrived.notify_waiters();
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
        validate_rabbitmq_queue_name(name)?;
        self.inner.queues.insert(priority, name.to_owned());
        Ok(())
    }

    async fn send(&self, message: &hermes_core::Message, priority: Priority) -> Result<(), Error> {
        message.check()?;
        let target = self.inner.queues.get(priority)?;
        let body = self.inner.serializer.serialize(message)?;
        let session = self.session().await?;
        let route = self.route(&session, &target, &body, message.execute_at());
        bounded("publishing", Some(&session), route).await
    }

    /// Waits for a delivery from the consumers of the selected queues, starting them on first
    /// use (and again after a reconnection).
    ///
    /// # Cancellation safety
    /// Safe: a delivery is only taken out of the driver's buffer when it is returned.
    async fn receive(
        &self,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        let queues = self.inner.queues.selected(priorities)?;
        let deadline = Instant::now() + wait;
        let mut patience: Option<Instant> = None;
        loop {
            let session = self.session().await?;
            let consume = self.consume(&session, &queues);
            bounded("starting the consumers", Some(&session), consume).await?;
            let arrived = self.inner.buffer.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            let patient = patience.is_none_or(|until| Instant::now() < until);
            let pick = self.pick(&session, &queues, patient);
            let pause = match bounded("looking at the queues", Some(&session), pick).await? {
                Pick::Found(delivery) => return delivery.map(Some),
                Pick::HigherComing => {
                    patience.get_or_insert_with(|| Instant::now() + HIGHER_PRIORITY_PATIENCE);
                    Duration::from_millis(5)
                }
                Pick::Nothing => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Ok(None);
                    }
                    (deadline - now).min(self.inner.options.refresh_interval)
                }
            };
            tokio::select! {
                _ = &mut arrived => {}
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.settle(delivery, async |acker| {
            acker.ack(BasicAckOptions::default()).await.map(drop)
        })
        .await
    }

    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.settle(delivery, async |acker| {
            let options = BasicNackOptions {
                requeue: true,
                ..BasicNackOptions::default()
            };
            acker.nack(options).await.map(drop)
        })
        .await
    }

    /// Stops this process's consumers and gives back the messages they delivered that no
    /// `receive` took. A later `receive` starts the consumers again.
    async fn flush(&self) -> Result<(), Error> {
        let session = self.inner.session.lock().await.clone();
        if let Some(session) = session {
            let consumers: Vec<Consuming> = session
                .consumers
                .lock()
                .await
                .drain()
                .map(|(_, c)| c)
                .collect();
            for consuming in consumers {
                if session.alive() {
                    let cancel = session
                        .consumer
                        .basic_cancel(consuming.tag.as_str().into(), BasicCancelOptions::default());
                    let cancel = async { cancel.await.map_err(lapin_error) };
                    let _ = bounded("cancelling a consumer", Some(&session), cancel).await;
                }
                // The consumer ends after the deliveries the broker sent before the cancel.
                if tokio::time::timeout(FORWARDER_END, consuming.forwarder)
                    .await
                    .is_err()
                {
                    tracing::warn!("A consumer did not end within {FORWARDER_END:?} of its cancel");
                }
            }
        }
        let requeue = BasicNackOptions {
            requeue: true,
            ..BasicNackOptions::default()
        };
        for item in self.inner.buffer.drain() {
            if let Buffered::Message {
                acker,
                queue,
                session,
                ..
            } = item
            {
                session.settled(&queue);
                if session.alive() {
                    let nack = async { acker.nack(requeue).await.map_err(lapin_error) };
                    bounded("giving back a message", Some(&session), nack).await?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_password() {
        for (url, shown) in [
            (
                "amqp://guest:s3cret@127.0.0.1:5672/%2f",
                "amqp://guest:***@127.0.0.1:5672/%2f",
            ),
            ("amqps://u:p@a@host", "amqps://u:***@host"),
            ("amqp://u:pa/ss?x#y@host/vh", "amqp://u:***@host/vh"),
            ("amqp://user@host/vh", "amqp://user@host/vh"),
            ("amqp://host:5672", "amqp://host:5672"),
            ("not a url", "not a url"),
        ] {
            assert_eq!(redact_url(url), shown);
        }
    }
}
