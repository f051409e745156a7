//! The RabbitMQ driver: its public type, and the contract it keeps.

use std::sync::Arc;
use std::time::Duration;

use hermes_core::driver::{Capabilities, DeadLetters, Delivery, Inspect, PriorityQueues};
use hermes_core::{
    DEFAULT_PRIORITY, Driver, Error, JsonSerializer, Message, Priority, Serializer, async_trait,
};

use crate::amqp::Nodes;
use crate::core::Core;
use crate::naming::{quarantine_queue, validate_rabbitmq_queue_name};
use crate::url::UrlConfig;
use crate::{NAME, RabbitMqOptions};

/// Hermes' RabbitMQ driver: one durable queue on the default exchange, declared without
/// arguments (an existing Hermes queue keeps working), persistent messages, consumed with a
/// `basic.qos` prefetch (default 1) and acknowledged after the handlers; publisher confirms (a
/// `send` that returned is on the broker).
///
/// Beyond Hermes: delays of any length without a broker plugin (a ladder of delay queues
/// `<queue>.delay.level<n>` whose TTLs double from level to level: a message is routed through
/// the levels that add up to its delay and dead-lettered to its queue when due, so it never
/// arrives early, whoever consumes the queue; a delay longer than the ladder holds makes several
/// trips), one queue per priority (`setup_priority_queue`), taken
/// highest first, and reconnection after the broker restarts (unacknowledged messages are
/// delivered again by the broker). Undecodable bodies move to `<queue>.quarantine`, or are
/// rejected as in Hermes (see [`UndecodableAction`](crate::UndecodableAction)).
///
/// Inspection and dead letters (see [`Driver::inspect`] and [`Driver::dead_letters`]): stats
/// per priority queue from passive declarations (dead exact, waiting and delayed approximate,
/// in flight and latency unknown: AMQP does not tell them), purges of the waiting, delayed
/// and dead messages, and dead letters. No peek and no delete by id ([`Driver::browse`] is
/// `None`): AMQP reads a queue only by taking its messages. The dead letters of a priority
/// queue are its `<queue>.quarantine`, which holds both the undecodable bodies and the
/// messages whose handler failed for good: each is the body exactly as it was delivered,
/// with its reason in AMQP headers ([`DEAD_ID`](crate::DEAD_ID),
/// [`DEAD_KIND`](crate::DEAD_KIND), [`DEAD_ERROR`](crate::DEAD_ERROR),
/// [`DEAD_HANDLER`](crate::DEAD_HANDLER), [`DEAD_AT`](crate::DEAD_AT),
/// [`DEAD_RETRIES`](crate::DEAD_RETRIES), [`PRIORITY`](crate::PRIORITY)). PHP Hermes never
/// reads that queue, and the priority queues keep Hermes' plain JSON bodies, a replayed
/// message's too. A body quarantined by an earlier version, without headers, lists as an
/// undecodable dead letter at time 0, its id made from its digest. Retention: see
/// [`RabbitMqOptions::retention`].
///
/// Clones are cheap and share the connection and the consumers. Nothing connects until the
/// first `send` or `receive`. A `receive` starts one consumer per
/// selected queue; they keep running (holding up to `prefetch` messages each) until
/// [`Driver::flush`] or until the driver is dropped, which gives their messages back.
#[derive(Debug, Clone)]
pub struct RabbitMqDriver {
    core: Arc<Core>,
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
        options.validate()?;
        let queues = PriorityQueues::with(DEFAULT_PRIORITY, queue.to_owned());
        let core = Core::new(
            Nodes::new(url),
            queue,
            options,
            Arc::new(JsonSerializer),
            queues,
        );
        Ok(RabbitMqDriver {
            core: Arc::new(core),
        })
    }

    /// A driver from an AMQP URL, as the `hermes` command and programs that take their queue
    /// from the environment use: `amqp://` or `amqps://`, user, password, host, port and
    /// virtual host as the broker's URI spec has them (`/%2f` is the virtual host `/`), and
    /// these parameters, all optional:
    ///
    /// | parameter | meaning | default |
    /// |---|---|---|
    /// | `queue` | the queue of the default priority | `hermes` |
    /// | `prefetch` | [`RabbitMqOptions::prefetch`], 1 to 65535 | 1 |
    /// | `durable` | [`RabbitMqOptions::durable`], `true` or `false` | `true` |
    /// | `queue_type` | [`RabbitMqOptions::queue_type`]: `classic` or `quorum` | `classic` |
    /// | `fallback` | other nodes of the cluster, `host:port` separated by commas, with the same user and virtual host ([`with_fallback_urls`](RabbitMqDriver::with_fallback_urls)) | none |
    /// | `consumer_tag` | [`RabbitMqOptions::consumer_tag`] | `hermes` |
    /// | `undecodable` | [`RabbitMqOptions::undecodable`]: `quarantine` or `reject` | `quarantine` |
    /// | `refresh_interval` | [`RabbitMqOptions::refresh_interval`], in seconds | 0.1 |
    /// | `retention_count` | the dead letters kept per queue ([`RabbitMqOptions::retention`]) | 10000 |
    /// | `retention_age` | their longest age, in seconds | 15552000 (180 days) |
    ///
    /// A `%XX` escape in a value stands for that byte. The URL without its parameters is what
    /// the client library connects to. Nothing connects until first use. An `amqps://` URL
    /// needs lapin built with a TLS backend (its `rustls` feature, say); without one the
    /// connection fails.
    ///
    /// ```
    /// use hermes_rabbitmq::RabbitMqDriver;
    ///
    /// let driver = RabbitMqDriver::from_url("amqp://guest:guest@127.0.0.1:5672/%2f?queue=exports&prefetch=16")?;
    /// assert_eq!(driver.quarantine_queue(), "exports.quarantine");
    /// let err = RabbitMqDriver::from_url("amqp://guest:s3cret@127.0.0.1/%2f?colour=red").unwrap_err();
    /// assert!(err.to_string().contains("colour") && !err.to_string().contains("s3cret"));
    /// # Ok::<(), hermes_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] for a URL of another scheme, without a host, with an unknown
    /// parameter or a bad value; [`Error::InvalidQueueName`] for a bad queue name. No error
    /// shows the password.
    pub fn from_url(url: &str) -> Result<Self, Error> {
        let config = UrlConfig::parse(url)?;
        let driver = RabbitMqDriver::new(&config.address, &config.queue, config.options)?;
        Ok(match config.fallback {
            Some(nodes) => driver.with_fallback_urls(nodes),
            None => driver,
        })
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
        let core = Core::new(
            self.core.nodes.and([]),
            &self.core.queue,
            self.core.options.clone(),
            Arc::new(serializer),
            self.core.queues.clone(),
        );
        RabbitMqDriver {
            core: Arc::new(core),
        }
    }

    /// The same queues, also on the other nodes of the broker's cluster at `urls`, as a new
    /// instance (with a connection of its own): when the node in use goes away, the next
    /// connection goes to the next node that answers, in turn. Suits
    /// [`QueueType::Quorum`](crate::QueueType), whose queues live on several nodes.
    ///
    /// ```
    /// use hermes_rabbitmq::{QueueType, RabbitMqDriver, RabbitMqOptions};
    ///
    /// let mut options = RabbitMqOptions::default();
    /// options.queue_type = QueueType::Quorum;
    /// let driver = RabbitMqDriver::new("amqp://guest:guest@node1:5672/%2f", "hermes", options)?
    ///     .with_fallback_urls(["amqp://guest:guest@node2:5672/%2f", "amqp://guest:guest@node3:5672/%2f"]);
    /// # Ok::<(), hermes_core::Error>(())
    /// ```
    #[must_use]
    pub fn with_fallback_urls(self, urls: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let core = Core::new(
            self.core.nodes.and(urls.into_iter().map(Into::into)),
            &self.core.queue,
            self.core.options.clone(),
            self.core.serializer.clone(),
            self.core.queues.clone(),
        );
        RabbitMqDriver {
            core: Arc::new(core),
        }
    }

    /// The queue holding undecodable messages.
    pub fn quarantine_queue(&self) -> String {
        quarantine_queue(&self.core.queue)
    }
}

#[async_trait]
impl Driver for RabbitMqDriver {
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

    /// Publishes every message of the batch in order, then waits for all their confirms
    /// together: about one round trip for the batch. Every message is checked and encoded
    /// before anything is published.
    ///
    /// # Errors
    /// As [`send`](Driver::send); nothing is published when a message is refused. A message
    /// the broker refuses (a nack) or no queue takes fails the call, naming how many of the
    /// batch; the others are queued, confirmed.
    async fn send_batch(&self, messages: &[Message], priority: Priority) -> Result<(), Error> {
        self.core.send_batch(messages, priority).await
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
        self.core.receive(priorities, wait).await
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.core.ack(delivery).await
    }

    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.core.nack(delivery).await
    }

    /// Stops this process's consumers and gives back the messages they delivered that no
    /// `receive` took. A later `receive` starts the consumers again.
    async fn flush(&self) -> Result<(), Error> {
        self.core.flush().await
    }

    fn inspect(&self) -> Option<&dyn Inspect> {
        Some(&*self.core)
    }

    fn dead_letters(&self) -> Option<&dyn DeadLetters> {
        Some(&*self.core)
    }

    // No browse: AMQP reads a queue only by taking its messages. No unique emits: a queue of
    // this broker cannot refuse a message whose key another one holds. No workers.
}
