//! Options of the RabbitMQ driver.

use std::time::Duration;

use hermes_core::Error;
use hermes_core::inspect::Retention;
use lapin::BasicProperties;

use crate::NAME;

/// Options of a [`RabbitMqDriver`](crate::RabbitMqDriver). Start from
/// [`RabbitMqOptions::default`] and change fields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RabbitMqOptions {
    /// Declare queues durable and publish persistent messages (delivery mode 2). Default true;
    /// false gives non-durable queues and transient messages.
    pub durable: bool,
    /// The properties of published messages (content type, headers, expiration, …). The
    /// delivery mode, when not set here, is 2 (persistent) for a durable queue and 1 otherwise.
    pub properties: BasicProperties,
    /// How many unacknowledged messages the broker sends ahead to each of this worker's
    /// consumers (`basic.qos` prefetch count, one consumer per priority queue). Default 1, as in
    /// Hermes: a message waits on the broker, where other workers can take it, until this worker
    /// is ready for it. Raise it (e.g. 16) for throughput with a concurrent dispatcher.
    pub prefetch: u16,
    /// The consumer tag of the default queue's consumer; another priority queue's consumer is
    /// tagged `<tag>.<queue>`. Default `hermes`.
    pub consumer_tag: String,
    /// What happens to a message body that cannot be decoded. Default
    /// [`UndecodableAction::Quarantine`].
    pub undecodable: UndecodableAction,
    /// How often an idle `receive` checks that the connection is still up. Messages wake a
    /// waiting `receive` at once; this only bounds how late a lost connection is noticed.
    /// Default 100 ms.
    pub refresh_interval: Duration,
    /// How many dead letters each priority queue's `<queue>.quarantine` keeps, and for how
    /// long; the oldest go first. Default 10,000 and 180 days. The count is the broker's
    /// `x-max-length` of a dead-letter queue this version declares, exact; a dead-letter
    /// queue that already exists with other arguments (an earlier version's quarantine, or
    /// a count changed since) keeps its arguments, and the driver drops its oldest letters
    /// beyond the count each time it adds one. The age is applied by the driver: adding a
    /// dead letter drops the oldest ones past it, and listing or replaying drops every one
    /// past it that it meets; until then, letters past the age stay (and are counted). A
    /// letter quarantined by an earlier version has no recorded time and is kept whatever
    /// its age (the count still applies).
    pub retention: Retention,
    /// The type of every queue the driver declares: the priority queues, their delay ladders
    /// and their dead-letter queues. Default [`QueueType::Classic`], as Hermes declares.
    pub queue_type: QueueType,
}

/// The type of the queues a [`RabbitMqDriver`](crate::RabbitMqDriver) declares (their
/// `x-queue-type` argument).
///
/// A queue's type is fixed when the queue is created: a driver declaring an existing queue as
/// the other type fails with the broker's `PRECONDITION_FAILED`, and so does PHP Hermes, which
/// declares its queue without arguments, on a quorum queue: quorum queues are for Rust
/// processes only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum QueueType {
    /// Classic queues, declared without `x-queue-type`, as Hermes declares them.
    #[default]
    Classic,
    /// Quorum queues (`x-queue-type: quorum`): replicated over the nodes of a cluster with
    /// Raft, so a confirmed message survives the loss of a minority of the nodes. They must be
    /// durable. Their delay ladder dead-letters at least once (`x-dead-letter-strategy:
    /// at-least-once`), so a broker stopping while a delayed message moves between its levels
    /// does not drop it.
    Quorum,
}

impl QueueType {
    /// Its name, as the `queue_type` URL parameter and the broker spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueType::Classic => "classic",
            QueueType::Quorum => "quorum",
        }
    }
}

/// What the driver does with a message body that cannot be decoded. Either way it rejects the
/// message without requeueing (`basic.nack`, `requeue = false`), as Hermes does, so a
/// dead-letter exchange set on the queue gets it, and `receive` reports
/// [`Error::Undecodable`](hermes_core::Error::Undecodable) and goes on with the next message.
///
/// Hermes declares its queue without arguments; give it a dead-letter exchange with a policy,
/// e.g. `rabbitmqctl set_policy hermes-dlx '^hermes$'
/// '{"dead-letter-exchange":"","dead-letter-routing-key":"hermes.dead"}' --apply-to queues`
/// (and declare the queue `hermes.dead`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum UndecodableAction {
    /// First publish the body to `<queue>.quarantine` (see
    /// [`quarantine_queue`](crate::quarantine_queue)) as a dead letter of kind
    /// `undecodable`, with the decoder's reason, so nothing is lost whatever the broker's
    /// settings; [`DeadLetters::list`](hermes_core::driver::DeadLetters::list) lists it and
    /// [`DeadLetters::replay`](hermes_core::driver::DeadLetters::replay) puts its bytes back.
    #[default]
    Quarantine,
    /// Only reject it: the broker drops it unless the queue has a dead-letter exchange.
    Reject,
}

impl Default for RabbitMqOptions {
    fn default() -> Self {
        RabbitMqOptions {
            durable: true,
            properties: BasicProperties::default(),
            prefetch: 1,
            consumer_tag: "hermes".to_owned(),
            undecodable: UndecodableAction::default(),
            refresh_interval: Duration::from_millis(100),
            retention: Retention::default(),
            queue_type: QueueType::default(),
        }
    }
}

impl RabbitMqOptions {
    /// Checks the options: a prefetch of at least 1, a consumer tag of 1 to 200 bytes,
    /// properties without an expiration, and durable quorum queues.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        let problem = if self.prefetch == 0 {
            Some("the prefetch must be at least 1")
        } else if self.consumer_tag.is_empty() || self.consumer_tag.len() > 200 {
            Some("the consumer tag must be 1 to 200 bytes long")
        } else if self.properties.expiration().is_some() {
            Some(
                "the properties must not set an expiration: a per-message TTL would let a \
                 delayed message out of the delay queues before it is due",
            )
        } else if self.queue_type == QueueType::Quorum && !self.durable {
            Some("quorum queues are always durable: a quorum queue type needs durable = true")
        } else {
            None
        };
        match problem {
            Some(message) => Err(Error::Config {
                driver: NAME,
                message: message.to_owned(),
            }),
            None => Ok(()),
        }
    }

    /// The properties of a published message: [`RabbitMqOptions::properties`], with a delivery
    /// mode.
    pub(crate) fn published_properties(&self) -> BasicProperties {
        let mode = self
            .properties
            .delivery_mode()
            .unwrap_or(if self.durable { 2 } else { 1 });
        self.properties.clone().with_delivery_mode(mode)
    }
}
