//! The SQS driver: its public type, and the contract it keeps.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::QueueAttributeName;
use hermes_core::driver::{
    Capabilities, DeadLetters, Delivery, Inspect, PriorityQueues, async_trait,
};
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, JsonSerializer, Message, Priority, Serializer};

use crate::core::Core;
use crate::naming::{MAX_DEFAULT_QUEUE_NAME_LEN, validate_sqs_queue_name};
use crate::url::SqsUrl;
use crate::{NAME, SqsOptions, api};

/// Hermes' Amazon SQS driver: the queue is created (or found) by name on first use, messages
/// are Hermes' JSON unchanged, `receive` long-polls, and a message is deleted only after the
/// handlers ran (at-least-once): a worker that dies in the middle leaves it to come back after
/// the visibility timeout.
///
/// Beyond Hermes:
/// - **Delays of any length.** A message due in the future is sent with `DelaySeconds` (up to
///   [`SqsOptions::max_delay`], 900 s). One due later waits in the queue `<queue>-delay`
///   (see [`delay_queue`](crate::delay_queue)), which only Hermes for Rust reads: a worker's
///   `receive` looks at it every `max_delay / 2` (30 s at most) and sends each message on, to
///   its own queue once no more than `max_delay` is left, so it never reaches a queue before
///   it is due, whoever consumes that queue. One that arrives before it is due (sent without
///   its delay) is sent on the same way, and the early copy deleted. Retries wait their
///   backoff.
/// - **Priorities**: one SQS queue per priority (`setup_priority_queue`). A `receive` takes
///   from the highest-priority queue that has a message: with several queues it first asks each,
///   highest first, without waiting (`WaitTimeSeconds=0`), and only when all were empty
///   long-polls them all at once.
/// - **Lease extension**: [`Driver::extend`] changes the message's visibility, so a slow handler
///   is not run twice.
/// - **Dead letters** in the queue `<queue>-quarantine` (see
///   [`quarantine_queue`](crate::quarantine_queue)), created on first use, one for all the
///   priority queues. A message whose handler failed for good is sent there by
///   [`DeadLetters::add`], its body unchanged, and then deleted from its queue (only after
///   the send succeeded: a failure in between may leave it in both). An undecodable body is
///   moved there the same way, and `receive` returns [`Error::Undecodable`]. The reason goes
///   in six message attributes: [`KIND_ATTRIBUTE`](crate::KIND_ATTRIBUTE),
///   [`ERROR_ATTRIBUTE`](crate::ERROR_ATTRIBUTE) (the first 1,024 bytes),
///   [`HANDLER_ATTRIBUTE`](crate::HANDLER_ATTRIBUTE), [`AT_ATTRIBUTE`](crate::AT_ATTRIBUTE),
///   [`RETRIES_ATTRIBUTE`](crate::RETRIES_ATTRIBUTE) and
///   [`QUEUE_ATTRIBUTE`](crate::QUEUE_ATTRIBUTE), the queue it came from. PHP
///   Hermes never reads that queue; the priority queues keep Hermes' plain JSON. A message
///   there without these attributes is an undecodable letter of the default queue, without a
///   recorded reason.
/// - **Listing dead letters** ([`DeadLetters::list`]): SQS has no peek, so the driver
///   receives the whole dead-letter queue (until a long poll of 1 s brings nothing new, each
///   letter once), sorts it oldest first and makes every letter visible again. Meanwhile, for
///   30 s at most, the letters are hidden from another listing, replay or purge.
///   [`DeadLetters::replay`] receives them the same way, sends each selected one to its
///   priority queue (a decodable one as
///   [`Replay::replayed`](hermes_core::inspect::Replay::replayed), an undecodable one as its
///   exact body) and then deletes it.
/// - **Retention** ([`SqsOptions::retention`]), as closely as SQS allows: the age becomes the
///   dead-letter queue's `MessageRetentionPeriod` (set when the driver creates the queue, and
///   raised, never lowered, when it finds one keeping letters for less), which SQS caps at 14
///   days, so the default 180 days keeps letters 14 days. The count cap
///   applies to the whole dead-letter queue, all priorities together: after each dead letter,
///   while SQS's approximate count is over the cap, the oldest of the letters one receive sees
///   are deleted; SQS cannot find the very oldest, and its count may lag.
/// - **Figures** ([`Inspect::stats`]), all approximate, from SQS's
///   `ApproximateNumberOfMessages` (waiting), `…NotVisible` (in flight) and `…Delayed`
///   (delayed). Messages this process claimed ahead and has not handed out count as waiting.
///   The delay queue's and the dead-letter queue's counts are added to the queue's delayed and
///   dead figures when the driver has one queue; with several priority queues SQS cannot tell
///   whose they are, so those figures are [`Figure::Unknown`](hermes_core::inspect::Figure) unless the
///   shared queue is empty. The latency is always unknown (SQS does not say how old the
///   oldest message is). A queue that does not exist yet counts 0 and is not created.
/// - **Purge** ([`Inspect::purge`]) of the waiting messages (received and deleted until none is
///   left; those delayed or in flight are not received, so they stay) and of the dead letters
///   of one queue. Delayed and in-flight messages cannot be purged alone (SQS cannot receive
///   them, and `PurgeQueue` empties a whole queue): those purges are [`Error::Unsupported`].
///   There is no [`Browse`](hermes_core::driver::Browse) facet: SQS cannot read a message
///   without claiming it, nor delete one by id.
/// - **Batched sends**: [`Driver::send_batch`] sends up to 10 messages per `SendMessageBatch`
///   request (and at most [`SqsOptions::max_payload`] bytes of bodies), each with its own
///   `DelaySeconds` as `send` would give it.
/// - **Batches**: one `ReceiveMessage` takes up to 10 messages; the extra ones wait in this
///   process, claimed, and are handed out one per `receive` (their visibility is extended when
///   half of it is gone, and those about to become visible again are left to SQS). `flush`, which
///   the dispatcher calls when it stops, gives back what was not handed out.
///
/// Standard queues only: SQS does not keep their order, so the driver does not declare
/// [`Capabilities::fifo`]. Clones share the queues, the claimed messages and the client.
#[derive(Clone)]
pub struct SqsDriver {
    core: Arc<Core>,
}

impl fmt::Debug for SqsDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.core, f)
    }
}

impl SqsDriver {
    /// A driver for the SQS queue called `queue` (priority [`DEFAULT_PRIORITY`]), created with
    /// `attributes` when it does not exist, as Hermes' `AmazonSqsDriver($client, $queueName,
    /// $queueAttributes)`. Nothing is sent to SQS until first use.
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for a name SQS does not accept (letters, digits, `-` and `_`,
    /// at most 69 characters so that `<queue>-quarantine` fits SQS's 80).
    pub fn new(
        client: Client,
        queue: &str,
        attributes: HashMap<QueueAttributeName, String>,
    ) -> Result<Self, Error> {
        let options = SqsOptions {
            queue_attributes: attributes,
            ..SqsOptions::default()
        };
        SqsDriver::with_options(client, queue, options)
    }

    /// A driver for the SQS queue called `queue` with `options`.
    ///
    /// # Errors
    /// As [`SqsDriver::new`]; [`Error::Config`] for options outside SQS's limits.
    pub fn with_options(client: Client, queue: &str, options: SqsOptions) -> Result<Self, Error> {
        validate_sqs_queue_name(queue, MAX_DEFAULT_QUEUE_NAME_LEN)?;
        options.validate()?;
        let queues = PriorityQueues::with(DEFAULT_PRIORITY, queue.to_owned());
        let core = Core::new(client, queue, options, Arc::new(JsonSerializer), queues);
        Ok(SqsDriver {
            core: Arc::new(core),
        })
    }

    /// A driver from a URL `sqs://<queue>?region=<region>`, as the `hermes` command and
    /// programs that take their queue from the environment use. The host is the default
    /// queue's name. Parameters, all optional:
    ///
    /// - `endpoint`: the server, an `http://` or `https://` URL; default AWS's for the region.
    /// - `region`: default from the AWS default chain (`AWS_REGION`, the profile, …); one of
    ///   them must give it.
    /// - `wait_time`, `visibility_timeout`, `max_delay` (seconds), `batch_size`,
    ///   `max_payload` (bytes): the [`SqsOptions`] fields of those names, with their defaults.
    /// - `retention_count` and `retention_age` (seconds): [`SqsOptions::retention`].
    ///
    /// Credentials come from the AWS default chain (environment variables, the profile files,
    /// the role of the machine); a URL with a user or password is refused. The client speaks
    /// HTTPS (rustls, with the system's certificates) and plain HTTP, gives up connecting after
    /// 3 s, and each call is bounded as every call of the driver is (10 s beyond its long
    /// poll). A `%XX` escape in a value stands for that byte.
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), hermes_core::Error> {
    /// use hermes_sqs::SqsDriver;
    ///
    /// let driver = SqsDriver::from_url("sqs://exports?region=eu-west-1&wait_time=20").await?;
    /// assert_eq!(driver.queue(), "exports");
    /// let _local = SqsDriver::from_url("sqs://hermes?endpoint=http://127.0.0.1:4566&region=us-east-1").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] for a URL of another scheme, without a queue, with a port, path or
    /// credentials, with an unknown parameter or a bad value, or when no region is found;
    /// [`Error::InvalidQueueName`] for a queue name SQS does not take. Nothing is sent to SQS
    /// until first use.
    pub async fn from_url(url: &str) -> Result<Self, Error> {
        let url = SqsUrl::parse(url)?;
        let client = api::connect(url.endpoint.as_deref(), url.region.as_deref()).await?;
        SqsDriver::with_options(client, &url.queue, url.options)
    }

    /// The same queues with `serializer` instead of [`JsonSerializer`], as a new instance.
    #[must_use]
    pub fn with_serializer(self, serializer: impl Serializer) -> Self {
        let core = Core::new(
            self.core.client.clone(),
            &self.core.queue,
            self.core.options.clone(),
            Arc::new(serializer),
            self.core.queues.clone(),
        );
        SqsDriver {
            core: Arc::new(core),
        }
    }

    /// The SQS client.
    pub fn client(&self) -> &Client {
        &self.core.client
    }

    /// The name of the default queue.
    pub fn queue(&self) -> &str {
        &self.core.queue
    }

    /// The name of the dead-letter queue: `<queue>-quarantine`.
    pub fn quarantine_queue(&self) -> &str {
        &self.core.quarantine
    }

    /// The URL of the queue of `priority`, creating the queue when it does not exist.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`] when no queue is set up for `priority`; SQS errors.
    pub async fn queue_url(&self, priority: Priority) -> Result<String, Error> {
        let name = self.core.queues.get(priority)?;
        Ok(self.core.resolve(&name).await?.url.clone())
    }
}

#[async_trait]
impl Driver for SqsDriver {
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

    /// Sends `messages` in order with `SendMessageBatch`, ten per request at most, and fewer
    /// when their bodies together would exceed [`SqsOptions::max_payload`] bytes (SQS's limit
    /// for a whole request). Each message gets the `DelaySeconds` [`send`](Driver::send) would
    /// give it, computed when its request is made. An entry SQS refuses is sent again alone,
    /// once, with `SendMessage`.
    ///
    /// # Errors
    /// [`Error::PayloadTooLarge`] (or [`Error::InvalidMessage`]) when any message is too large
    /// (or not text): nothing is sent then. [`Error::UnknownPriority`]; SQS errors. After an
    /// SQS error the requests before the failing one were sent. When a request itself fails,
    /// none of its messages were sent; when the lone send of a refused entry fails, the
    /// entries of its request that SQS took were sent, and the refused entries before it.
    ///
    /// # Cancellation safety
    /// Dropping the future may have sent any number of the requests, in order.
    async fn send_batch(&self, messages: &[Message], priority: Priority) -> Result<(), Error> {
        self.core.send_batch(messages, priority).await
    }

    async fn receive(
        &self,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        self.core.receive(priorities, wait).await
    }

    /// Deletes the message, while its claim lasts. Past its lease the message may be another
    /// worker's already (SQS may still accept the old receipt), so it is left to run again.
    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.core.ack(delivery).await
    }

    /// Makes the message visible again at once, while its claim lasts (past it, the message
    /// is visible by itself, or another worker's).
    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.core.nack(delivery).await
    }

    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        self.core.extend(delivery, by).await
    }

    /// Waits for the polls still running (at most [`SqsOptions::wait_time`] and a little), then
    /// makes the messages this process holds but did not hand out visible again.
    async fn flush(&self) -> Result<(), Error> {
        self.core.flush().await
    }

    fn inspect(&self) -> Option<&dyn Inspect> {
        Some(&*self.core)
    }

    fn dead_letters(&self) -> Option<&dyn DeadLetters> {
        Some(&*self.core)
    }

    // No browse (SQS cannot read a message without claiming it), no workers (nowhere to keep
    // them), and no unique emits: a queue of this broker cannot refuse a message whose key
    // another one holds.
}
