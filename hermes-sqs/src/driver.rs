//! The SQS driver.

use std::collections::HashMap;
use std::fmt;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::QueueAttributeName;
use hermes_core::driver::{Capabilities, Delivery, PriorityQueues};
use hermes_core::inspect::{DeadLetter, DeadReason, QueueState, QueueStats, Replay};
use hermes_core::{
    DEFAULT_PRIORITY, Driver, Error, JsonSerializer, Message, Priority, Serializer, async_trait,
};
use tokio::sync::{Notify, OnceCell};
use tokio::time::Instant;

use crate::naming::{
    MAX_DEFAULT_QUEUE_NAME_LEN, MAX_QUEUE_NAME_LEN, delay_queue, quarantine_queue,
    validate_sqs_queue_name,
};
use crate::poll::{HeldQueue, SqsReceipt, drain, give_back};
use crate::queue::QueueInfo;
use crate::send::request_end;
use crate::{NAME, SqsOptions};

/// How far past the deadline of a `receive` a long poll may end, so that a wait of one second
/// still gets a one-second long poll.
const POLL_SLACK: Duration = Duration::from_millis(50);

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
///   [`Driver::dead_letter`], its body unchanged, and then deleted from its queue (only after
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
/// - **Listing dead letters** ([`Driver::dead_letters`]): SQS has no peek, so the driver
///   receives the whole dead-letter queue (until a long poll of 1 s brings nothing new, each
///   letter once), sorts it oldest first and makes every letter visible again. Meanwhile, for
///   30 s at most, the letters are hidden from another listing, replay or purge.
///   [`Driver::replay`] receives them the same way, sends each selected one to its priority
///   queue (a decodable one as [`Replay::replayed`], an undecodable one as its exact body) and
///   then deletes it.
/// - **Retention** ([`SqsOptions::retention`]), as closely as SQS allows: the age becomes the
///   dead-letter queue's `MessageRetentionPeriod` (set when the driver creates the queue, and
///   raised, never lowered, when it finds one keeping letters for less), which SQS caps at 14
///   days, so the default 180 days keeps letters 14 days. The count cap
///   applies to the whole dead-letter queue, all priorities together: after each dead letter,
///   while SQS's approximate count is over the cap, the oldest of the letters one receive sees
///   are deleted; SQS cannot find the very oldest, and its count may lag.
/// - **Figures** ([`Driver::stats`]), all approximate, from SQS's
///   `ApproximateNumberOfMessages` (waiting), `…NotVisible` (in flight) and `…Delayed`
///   (delayed). Messages this process claimed ahead and has not handed out count as waiting.
///   The delay queue's and the dead-letter queue's counts are added to the queue's delayed and
///   dead figures when the driver has one queue; with several priority queues SQS cannot tell
///   whose they are, so those figures are [`Figure::Unknown`](hermes_core::inspect::Figure) unless the
///   shared queue is empty. The latency is always unknown (SQS does not say how old the
///   oldest message is). A queue that does not exist yet counts 0 and is not created.
/// - **Purge** ([`Driver::purge`]) of the waiting messages (received and deleted until none is
///   left; those delayed or in flight are not received, so they stay) and of the dead letters
///   of one queue: it declares [`Capabilities::purge`]. Delayed and in-flight messages cannot
///   be purged alone (SQS cannot receive them, and `PurgeQueue` empties a whole queue): those
///   purges are [`Error::Unsupported`]. It declares neither [`Capabilities::peek`] nor
///   [`Capabilities::delete`].
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
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for SqsDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

pub(crate) struct Inner {
    pub(crate) client: Client,
    pub(crate) queue: String,
    pub(crate) quarantine: String,
    /// Where messages due later than SQS can delay wait: `<queue>-delay`.
    pub(crate) delay_queue: String,
    /// When a `receive` next looks at the delay queue.
    pub(crate) next_forward: Mutex<Instant>,
    /// Whether a task is moving messages out of the delay queue.
    pub(crate) forwarding: std::sync::atomic::AtomicBool,
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
    pub(crate) trimming: std::sync::atomic::AtomicBool,
}

impl fmt::Debug for Inner {
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

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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
        Ok(SqsDriver::build(
            client,
            queue,
            options,
            Arc::new(JsonSerializer),
            PriorityQueues::with(DEFAULT_PRIORITY, queue.to_owned()),
        ))
    }

    fn build(
        client: Client,
        queue: &str,
        options: SqsOptions,
        serializer: Arc<dyn Serializer>,
        queues: PriorityQueues<String>,
    ) -> Self {
        SqsDriver {
            inner: Arc::new(Inner {
                client,
                queue: queue.to_owned(),
                quarantine: quarantine_queue(queue),
                delay_queue: delay_queue(queue),
                next_forward: Mutex::new(Instant::now()),
                forwarding: std::sync::atomic::AtomicBool::new(false),
                options,
                serializer,
                queues,
                resolved: Mutex::default(),
                state: Mutex::default(),
                changed: Notify::new(),
                trimming: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// The same queues with `serializer` instead of [`JsonSerializer`], as a new instance.
    #[must_use]
    pub fn with_serializer(self, serializer: impl Serializer) -> Self {
        SqsDriver::build(
            self.inner.client.clone(),
            &self.inner.queue,
            self.inner.options.clone(),
            Arc::new(serializer),
            self.inner.queues.clone(),
        )
    }

    /// The SQS client.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The name of the default queue.
    pub fn queue(&self) -> &str {
        &self.inner.queue
    }

    /// The name of the dead-letter queue: `<queue>-quarantine`.
    pub fn quarantine_queue(&self) -> &str {
        &self.inner.quarantine
    }

    /// The URL of the queue of `priority`, creating the queue when it does not exist.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`] when no queue is set up for `priority`; SQS errors.
    pub async fn queue_url(&self, priority: Priority) -> Result<String, Error> {
        let name = self.inner.queues.get(priority)?;
        Ok(self.resolve(&name).await?.url.clone())
    }
}

impl Drop for Inner {
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

#[async_trait]
impl Driver for SqsDriver {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        let mut capabilities = Capabilities::all().without_inspection();
        capabilities.fifo = false;
        capabilities.stats = true;
        capabilities.purge = true;
        capabilities.dead_letters = true;
        capabilities.max_payload = Some(self.inner.options.max_payload);
        // A queue of this broker cannot refuse a message whose key another one holds.
        capabilities.unique = false;
        capabilities
    }

    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        validate_sqs_queue_name(name, MAX_QUEUE_NAME_LEN)?;
        self.inner.queues.insert(priority, name.to_owned());
        Ok(())
    }

    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        let name = self.inner.queues.get(priority)?;
        let body = self.encode(message)?;
        let queue = self.resolve(&name).await?;
        self.route(&queue, body, message.execute_at()).await
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
        if messages.is_empty() {
            return Ok(());
        }
        let name = self.inner.queues.get(priority)?;
        // All encoded and checked first: a message SQS would refuse fails the batch before
        // anything is sent.
        let bodies = messages
            .iter()
            .map(|message| self.encode(message))
            .collect::<Result<Vec<_>, _>>()?;
        let queue = self.resolve(&name).await?;
        // Those due later than SQS can delay go to the delay queue one by one; the rest in
        // batches.
        let (long, now): (Vec<_>, Vec<_>) = messages
            .iter()
            .zip(bodies)
            .partition(|(message, _)| self.beyond_max_delay(message.execute_at()));
        for (message, body) in long {
            self.route(&queue, body, message.execute_at()).await?;
        }
        let (messages, bodies): (Vec<Message>, Vec<String>) =
            now.into_iter().map(|(m, b)| (m.clone(), b)).unzip();
        let mut start = 0;
        while start < messages.len() {
            let end = request_end(&bodies, start, self.inner.options.max_payload);
            self.send_request(&queue, &messages[start..end], &bodies[start..end])
                .await?;
            start = end;
        }
        Ok(())
    }

    async fn receive(
        &self,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        let selected = self.inner.queues.selected(priorities)?;
        let deadline = Instant::now()
            .checked_add(wait)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600));
        // With several queues, or no time for a long poll: each queue, highest first, what this
        // process holds or what a poll without waiting finds.
        if selected.len() > 1 || wait < Duration::from_secs(1) {
            for (priority, name) in &selected {
                if let Some(found) = self.take(*priority, name).await {
                    return found.map(Some);
                }
                if let Some(poll) = self.start_poll(name, 0, false) {
                    hermes_core::driver::task::join(poll).await?;
                    if let Some(found) = self.take(*priority, name).await {
                        return found.map(Some);
                    }
                }
            }
        }
        // Then long polls on every queue at once, until one finds something or time is up.
        loop {
            let changed = pin!(self.inner.changed.notified());
            let mut changed = changed;
            changed.as_mut().enable();
            if let Some(found) = self.take_any(&selected).await {
                return found.map(Some);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            // Whole seconds; a poll may end a few milliseconds after the deadline.
            let seconds = (deadline - now + POLL_SLACK)
                .min(self.inner.options.wait_time)
                .as_secs() as i32;
            if seconds > 0 {
                for (_, name) in &selected {
                    // Detached: a poll that outlives this call leaves its messages held.
                    let _ = self.start_poll(name, seconds, true);
                }
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.take_any(&selected).await.transpose();
            }
        }
    }

    /// Deletes the message, while its claim lasts. Past its lease the message may be another
    /// worker's already (SQS may still accept the old receipt), so it is left to run again.
    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        let receipt = delivery.receipt().downcast::<SqsReceipt>(NAME)?;
        if !receipt.holds() {
            tracing::warn!(
                queue = %receipt.queue.name,
                "Message #{} was acknowledged after its claim ran out; it may run again",
                delivery.message().id()
            );
            return Ok(());
        }
        self.delete(&receipt.queue, &receipt.handle).await
    }

    /// Makes the message visible again at once, while its claim lasts (past it, the message
    /// is visible by itself, or another worker's).
    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        let receipt = delivery.receipt().downcast::<SqsReceipt>(NAME)?;
        if !receipt.holds() {
            return Ok(());
        }
        // A claim that is gone has made the message visible already.
        self.change_visibility(&receipt.queue, &receipt.handle, Duration::ZERO)
            .await
            .map(|_| ())
    }

    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        let receipt = delivery.receipt().downcast::<SqsReceipt>(NAME)?;
        let asked = Instant::now();
        if receipt.holds()
            && self
                .change_visibility(&receipt.queue, &receipt.handle, by)
                .await?
        {
            let mut leased_until = lock(&receipt.leased_until);
            if leased_until.is_some() {
                *leased_until = Some(asked + by);
            }
            Ok(())
        } else {
            Err(Error::InvalidDelivery(
                "the claim expired before it was extended".to_owned(),
            ))
        }
    }

    /// SQS's approximate counts; see [`SqsDriver`] for what each figure is.
    async fn stats(&self) -> Result<Vec<QueueStats>, Error> {
        self.stats_now().await
    }

    /// Receives the whole dead-letter queue, hiding it from other readers for a moment; see
    /// [`SqsDriver`].
    async fn dead_letters(
        &self,
        priority: Priority,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, Error> {
        self.dead_letters_now(priority, limit).await
    }

    /// Sends the delivery's body, unchanged, to the dead-letter queue with `reason` in its
    /// attributes, then deletes the delivery. A delivery whose claim ran out is left alone, as
    /// [`ack`](Driver::ack) leaves it.
    async fn dead_letter(&self, delivery: &Delivery, reason: &DeadReason) -> Result<(), Error> {
        let receipt = delivery.receipt().downcast::<SqsReceipt>(NAME)?;
        if !receipt.holds() {
            tracing::warn!(
                queue = %receipt.queue.name,
                "Message #{} failed after its claim ran out; it may run again",
                delivery.message().id()
            );
            return Ok(());
        }
        self.bury(
            &receipt.queue,
            &receipt.queue.name,
            &receipt.body,
            &receipt.handle,
            reason,
        )
        .await
    }

    async fn replay(&self, priority: Priority, replay: &Replay) -> Result<u64, Error> {
        self.replay_now(priority, replay).await
    }

    /// Purges [`QueueState::Waiting`] and [`QueueState::Dead`]; the others are
    /// [`Error::Unsupported`]. Returns how many were deleted.
    async fn purge(&self, priority: Priority, state: QueueState) -> Result<Option<u64>, Error> {
        self.purge_now(priority, state).await.map(Some)
    }

    /// Waits for the polls still running (at most [`SqsOptions::wait_time`] and a little), then
    /// makes the messages this process holds but did not hand out visible again.
    async fn flush(&self) -> Result<(), Error> {
        self.polls_ended(self.inner.options.wait_time + Duration::from_secs(5))
            .await;
        let held = drain(&mut self.state());
        if held.is_empty() {
            return Ok(());
        }
        give_back(&self.inner.client, held).await
    }
}
