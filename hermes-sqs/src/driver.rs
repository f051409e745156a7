//! The SQS driver.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, QueueAttributeName, SendMessageBatchRequestEntry,
};
use hermes_core::time::unix_now;
use hermes_core::{
    Capabilities, DEFAULT_PRIORITY, Delivery, Driver, Error, JsonSerializer, Message, Priority,
    PriorityQueues, Receipt, Serializer, async_trait,
};
use tokio::sync::{Notify, OnceCell};
use tokio::time::Instant;

use crate::error::sdk_error;
use crate::names::{
    MAX_DEFAULT_QUEUE_NAME_LEN, MAX_QUEUE_NAME_LEN, quarantine_queue, validate_sqs_queue_name,
};
use crate::{MAX_BATCH_SIZE, SqsOptions};

pub(crate) const NAME: &str = "sqs";

/// How long the quarantine keeps messages: 14 days, SQS's longest retention.
const QUARANTINE_RETENTION_SECONDS: &str = "1209600";

/// The visibility timeout of an SQS queue that does not say otherwise.
const SQS_DEFAULT_VISIBILITY: Duration = Duration::from_secs(30);

/// How far past the deadline of a `receive` a long poll may end, so that a wait of one second
/// still gets a one-second long poll.
const POLL_SLACK: Duration = Duration::from_millis(50);

/// How long before the answer to a `ReceiveMessage` its messages may have been claimed.
const CLAIM_UNCERTAINTY: Duration = Duration::from_secs(1);

/// SQS's longest visibility timeout.
const MAX_VISIBILITY_SECONDS: f64 = 43_200.0;

/// Hermes' Amazon SQS driver: the queue is created (or found) by name on first use, messages
/// are Hermes' JSON unchanged, `receive` long-polls, and a message is deleted only after the
/// handlers ran (at-least-once): a worker that dies in the middle leaves it to come back after
/// the visibility timeout.
///
/// Beyond Hermes:
/// - **Delays of any length.** A message due in the future is sent with `DelaySeconds` (up to
///   [`SqsOptions::max_delay`], 900 s); one that comes back before it is due is sent again with
///   what is left, and the early copy deleted. Retries wait their backoff.
/// - **Priorities**: one SQS queue per priority (`setup_priority_queue`). A `receive` takes
///   from the highest-priority queue that has a message: with several queues it first asks each,
///   highest first, without waiting (`WaitTimeSeconds=0`), and only when all were empty
///   long-polls them all at once.
/// - **Lease extension**: [`Driver::extend`] changes the message's visibility, so a slow handler
///   is not run twice.
/// - **Quarantine**: an undecodable body is moved to the dead-letter queue `<queue>-quarantine`
///   (created on first use, keeping messages 14 days) and `receive` returns
///   [`Error::Undecodable`].
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
    inner: Arc<Inner>,
}

impl fmt::Debug for SqsDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

struct Inner {
    client: Client,
    queue: String,
    quarantine: String,
    options: SqsOptions,
    serializer: Arc<dyn Serializer>,
    queues: PriorityQueues<String>,
    /// The URL and visibility timeout of each queue, looked up (or created) once.
    resolved: Mutex<HashMap<String, Arc<OnceCell<Arc<QueueInfo>>>>>,
    /// What this process holds of each queue, by queue name.
    state: Mutex<HashMap<String, QueueState>>,
    /// Notified when a poll buffered something or ended.
    changed: Notify,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqsDriver")
            .field("queue", &self.queue)
            .field("quarantine", &self.quarantine)
            .field("queues", &self.queues.all())
            .field("options", &self.options)
            .field("serializer", &self.serializer)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct QueueInfo {
    name: String,
    url: String,
    visibility: Duration,
}

#[derive(Debug, Default)]
struct QueueState {
    /// Taken from SQS, not handed out yet.
    entries: VecDeque<Entry>,
    /// A `ReceiveMessage` on this queue is running.
    polling: bool,
    /// The error of the last long poll, reported by the next `receive` of this queue.
    failure: Option<Error>,
}

#[derive(Debug)]
enum Entry {
    Message(Held),
    /// An undecodable message, already quarantined, still to be reported.
    Undecodable(Error),
}

/// A message claimed on SQS and held by this process.
#[derive(Debug)]
struct Held {
    message: Message,
    queue: Arc<QueueInfo>,
    handle: String,
    leased_until: Instant,
}

/// A delivered message's queue and receipt handle.
#[derive(Debug)]
struct SqsReceipt {
    queue: Arc<QueueInfo>,
    handle: String,
}

/// Marks a poll of a queue as running; ends it (and wakes the waiting `receive`s) when dropped,
/// also when the poll panicked.
struct Polling {
    inner: Arc<Inner>,
    name: String,
}

impl Drop for Polling {
    fn drop(&mut self) {
        if let Some(queue) = lock(&self.inner.state).get_mut(&self.name) {
            queue.polling = false;
        }
        self.inner.changed.notify_waiters();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// `duration` as whole seconds for SQS, rounded up, at most 12 hours.
fn whole_seconds(duration: Duration) -> i32 {
    duration.as_secs_f64().ceil().min(MAX_VISIBILITY_SECONDS) as i32
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
                options,
                serializer,
                queues,
                resolved: Mutex::default(),
                state: Mutex::default(),
                changed: Notify::new(),
            }),
        }
    }

    /// The same queues with `serializer` instead of [`JsonSerializer`], as a new instance.
    #[must_use]
    pub fn with_serializer(self, serializer: impl Serializer) -> Self {
        let queues = PriorityQueues::default();
        for (priority, name) in self.inner.queues.all() {
            queues.insert(priority, name);
        }
        SqsDriver::build(
            self.inner.client.clone(),
            &self.inner.queue,
            self.inner.options.clone(),
            Arc::new(serializer),
            queues,
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

    /// The name of the queue holding undecodable messages: `<queue>-quarantine`.
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

    fn state(&self) -> MutexGuard<'_, HashMap<String, QueueState>> {
        lock(&self.inner.state)
    }

    /// The queue called `name`, looked up, or created when it does not exist, once.
    async fn resolve(&self, name: &str) -> Result<Arc<QueueInfo>, Error> {
        let cell = lock(&self.inner.resolved)
            .entry(name.to_owned())
            .or_default()
            .clone();
        let info = cell.get_or_try_init(|| self.create_or_get(name)).await?;
        Ok(info.clone())
    }

    async fn create_or_get(&self, name: &str) -> Result<Arc<QueueInfo>, Error> {
        let client = &self.inner.client;
        let quarantine = name == self.inner.quarantine;
        let url = match client.get_queue_url().queue_name(name).send().await {
            Ok(found) => found.queue_url,
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_queue_does_not_exist()) =>
            {
                let attributes = if quarantine {
                    self.quarantine_attributes()
                } else {
                    self.inner.options.queue_attributes.clone()
                };
                client
                    .create_queue()
                    .queue_name(name)
                    .set_attributes((!attributes.is_empty()).then_some(attributes))
                    .send()
                    .await
                    .map_err(|e| sdk_error("CreateQueue", e))?
                    .queue_url
            }
            Err(e) => return Err(sdk_error("GetQueueUrl", e)),
        };
        let url = url.ok_or_else(|| {
            Error::driver(
                NAME,
                format!("SQS returned no URL for the queue {name}"),
                false,
            )
        })?;
        let visibility = match self.inner.options.visibility_timeout {
            Some(visibility) => visibility,
            None if quarantine => SQS_DEFAULT_VISIBILITY,
            None => {
                let attributes = client
                    .get_queue_attributes()
                    .queue_url(&url)
                    .attribute_names(QueueAttributeName::VisibilityTimeout)
                    .send()
                    .await
                    .map_err(|e| sdk_error("GetQueueAttributes", e))?;
                attributes
                    .attributes()
                    .and_then(|a| a.get(&QueueAttributeName::VisibilityTimeout))
                    .and_then(|v| v.parse().ok())
                    .map_or(SQS_DEFAULT_VISIBILITY, Duration::from_secs)
            }
        };
        Ok(Arc::new(QueueInfo {
            name: name.to_owned(),
            url,
            visibility,
        }))
    }

    /// The quarantine keeps messages as long as SQS allows, encrypted as the queues are.
    fn quarantine_attributes(&self) -> HashMap<QueueAttributeName, String> {
        let mut attributes: HashMap<_, _> = self
            .inner
            .options
            .queue_attributes
            .iter()
            .filter(|(name, _)| {
                matches!(
                    name,
                    QueueAttributeName::KmsMasterKeyId
                        | QueueAttributeName::KmsDataKeyReusePeriodSeconds
                        | QueueAttributeName::SqsManagedSseEnabled
                )
            })
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        attributes.insert(
            QueueAttributeName::MessageRetentionPeriod,
            QUARANTINE_RETENTION_SECONDS.to_owned(),
        );
        attributes
    }

    /// `message` as the text SQS stores.
    fn encode(&self, message: &Message) -> Result<String, Error> {
        let bytes = self.inner.serializer.serialize(message)?;
        let max = self.inner.options.max_payload;
        if bytes.len() > max {
            return Err(Error::PayloadTooLarge {
                driver: NAME,
                size: bytes.len(),
                max,
            });
        }
        String::from_utf8(bytes).map_err(|_| {
            Error::InvalidMessage(
                "SQS stores text, and the serializer produced bytes that are not UTF-8".to_owned(),
            )
        })
    }

    /// The `DelaySeconds` for a message due at `at`: what is left, rounded up (never early), at
    /// most `max_delay`; 0 when it is due.
    fn delay_seconds(&self, at: f64) -> i32 {
        let left = at - unix_now();
        if left.is_nan() || left <= 0.0 {
            return 0;
        }
        left.ceil().min(self.inner.options.max_delay.as_secs_f64()) as i32
    }

    /// The `DelaySeconds` `message` is sent with now.
    fn delay_for(&self, message: &Message) -> i32 {
        message.execute_at().map_or(0, |at| self.delay_seconds(at))
    }

    async fn send_body(
        &self,
        queue: &QueueInfo,
        body: String,
        delay_seconds: i32,
    ) -> Result<(), Error> {
        let mut request = self
            .inner
            .client
            .send_message()
            .queue_url(&queue.url)
            .message_body(body);
        if delay_seconds > 0 {
            request = request.delay_seconds(delay_seconds);
        }
        request
            .send()
            .await
            .map_err(|e| sdk_error("SendMessage", e))?;
        Ok(())
    }

    /// One `SendMessageBatch` of `messages` (at most ten) with their encoded `bodies`, each
    /// with its own delay. An entry SQS does not report as sent is sent again alone, once; the
    /// error of that send is returned.
    async fn send_request(
        &self,
        queue: &QueueInfo,
        messages: &[Message],
        bodies: &[String],
    ) -> Result<(), Error> {
        let entries = messages
            .iter()
            .zip(bodies)
            .enumerate()
            .map(|(i, (message, body))| {
                let delay_seconds = self.delay_for(message);
                let mut entry = SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(body.clone());
                if delay_seconds > 0 {
                    entry = entry.delay_seconds(delay_seconds);
                }
                entry
                    .build()
                    .map_err(|e| Error::driver(NAME, e.to_string(), false))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let output = self
            .inner
            .client
            .send_message_batch()
            .queue_url(&queue.url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| sdk_error("SendMessageBatch", e))?;
        for (i, (message, body)) in messages.iter().zip(bodies).enumerate() {
            let id = i.to_string();
            if output.successful().iter().any(|sent| sent.id() == id) {
                continue;
            }
            let reason = output
                .failed()
                .iter()
                .find(|failed| failed.id() == id)
                .map_or_else(
                    || "not reported".to_owned(),
                    |failed| {
                        format!(
                            "{}: {}",
                            failed.code(),
                            failed.message().unwrap_or_default()
                        )
                    },
                );
            tracing::warn!(
                queue = %queue.name,
                "SQS did not take message #{} of a batch ({reason}); sending it alone",
                message.id()
            );
            self.send_body(queue, body.clone(), self.delay_for(message))
                .await?;
        }
        Ok(())
    }

    /// Deletes a claimed message; one whose receipt is no longer valid is already gone or
    /// claimed again.
    async fn delete(&self, queue: &QueueInfo, handle: &str) -> Result<(), Error> {
        match self
            .inner
            .client
            .delete_message()
            .queue_url(&queue.url)
            .receipt_handle(handle)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_receipt_handle_is_invalid()) =>
            {
                tracing::warn!(
                    queue = %queue.name,
                    "A message was deleted after its receipt expired; it may be delivered again"
                );
                Ok(())
            }
            Err(e) => Err(sdk_error("DeleteMessage", e)),
        }
    }

    /// Makes a claimed message visible again `by` from now. `Ok(false)` when the claim is gone.
    async fn change_visibility(
        &self,
        queue: &QueueInfo,
        handle: &str,
        by: Duration,
    ) -> Result<bool, Error> {
        match self
            .inner
            .client
            .change_message_visibility()
            .queue_url(&queue.url)
            .receipt_handle(handle)
            .visibility_timeout(whole_seconds(by))
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e)
                if e.as_service_error().is_some_and(|e| {
                    e.is_receipt_handle_is_invalid() || e.is_message_not_inflight()
                }) =>
            {
                Ok(false)
            }
            Err(e) => Err(sdk_error("ChangeMessageVisibility", e)),
        }
    }

    /// Moves an undecodable message to the quarantine: sent there first, then deleted here.
    async fn quarantine(&self, from: &QueueInfo, body: &str, handle: &str) -> Result<(), Error> {
        let quarantine = self.resolve(&self.inner.quarantine).await?;
        self.send_body(&quarantine, body.to_owned(), 0).await?;
        self.delete(from, handle).await?;
        tracing::warn!(
            queue = %from.name,
            quarantine = %quarantine.name,
            "Moved an undecodable message from {} to {}",
            from.name,
            quarantine.name
        );
        Ok(())
    }

    fn push(&self, name: &str, entry: Entry) {
        self.state()
            .entry(name.to_owned())
            .or_default()
            .entries
            .push_back(entry);
        self.inner.changed.notify_waiters();
    }

    /// One `ReceiveMessage` on the queue called `name`, waiting up to `wait_seconds`: decoded
    /// messages that are due go to the buffer, early ones are delayed again, undecodable ones
    /// are quarantined (and reported through the buffer).
    async fn fetch(&self, name: &str, wait_seconds: i32) -> Result<(), Error> {
        let queue = self.resolve(name).await?;
        let mut request = self
            .inner
            .client
            .receive_message()
            .queue_url(&queue.url)
            .max_number_of_messages(self.inner.options.batch_size)
            .wait_time_seconds(wait_seconds);
        if let Some(visibility) = self.inner.options.visibility_timeout {
            request = request.visibility_timeout(whole_seconds(visibility));
        }
        let asked = Instant::now();
        let received = request
            .send()
            .await
            .map_err(|e| sdk_error("ReceiveMessage", e))?;
        // SQS claimed the messages somewhere between the request and the answer: a long poll
        // answers as soon as it has some, so count the claim from a second before the answer
        // (or from the request, when that is later).
        let claimed = Instant::now()
            .checked_sub(CLAIM_UNCERTAINTY)
            .map_or(asked, |t| t.max(asked));
        let leased_until = claimed + queue.visibility;
        for message in received.messages.unwrap_or_default() {
            let (Some(body), Some(handle)) = (message.body, message.receipt_handle) else {
                continue;
            };
            let decoded = match self.inner.serializer.deserialize(body.as_bytes()) {
                Ok(decoded) => decoded,
                Err(source) => {
                    self.quarantine(&queue, &body, &handle).await?;
                    let error = Error::Undecodable {
                        quarantine: format!("the SQS queue {}", self.inner.quarantine),
                        source,
                    };
                    self.push(name, Entry::Undecodable(error));
                    continue;
                }
            };
            if let Some(at) = decoded.execute_at().filter(|at| *at > unix_now()) {
                // Back before it is due (its delay was capped): send it again with what is
                // left, then delete this copy.
                self.send_body(&queue, body, self.delay_seconds(at).max(1))
                    .await?;
                self.delete(&queue, &handle).await?;
                continue;
            }
            self.push(
                name,
                Entry::Message(Held {
                    message: decoded,
                    queue: queue.clone(),
                    handle,
                    leased_until,
                }),
            );
        }
        Ok(())
    }

    /// Starts a `ReceiveMessage` on the queue called `name` in a task of its own (so that a
    /// dropped `receive` leaves what it takes in the buffer), unless one is running. When
    /// `keep_failure`, its error is kept for the next `receive` instead of being returned.
    fn start_poll(
        &self,
        name: &str,
        wait_seconds: i32,
        keep_failure: bool,
    ) -> Option<tokio::task::JoinHandle<Result<(), Error>>> {
        {
            let mut state = self.state();
            let queue = state.entry(name.to_owned()).or_default();
            if queue.polling {
                return None;
            }
            queue.polling = true;
        }
        let polling = Polling {
            inner: self.inner.clone(),
            name: name.to_owned(),
        };
        let driver = self.clone();
        Some(tokio::spawn(async move {
            let result = driver.fetch(&polling.name, wait_seconds).await;
            let outcome = {
                let mut state = driver.state();
                let queue = state.entry(polling.name.clone()).or_default();
                match result {
                    Err(error) if keep_failure => {
                        tracing::debug!("SQS poll of {} failed - {error}", polling.name);
                        queue.failure = Some(error);
                        Ok(())
                    }
                    Ok(()) => {
                        // A poll that worked makes an older failure moot.
                        queue.failure = None;
                        Ok(())
                    }
                    Err(error) => Err(error),
                }
            };
            // Ends the poll (and wakes the waiting `receive`s) after the state was updated.
            drop(polling);
            outcome
        }))
    }

    /// The next message held for the queue called `name`, delivered as from `priority`; or the
    /// error a poll of it left. Messages whose claim is about to run out are left to SQS; those
    /// past half of it get their visibility renewed first.
    async fn take(&self, priority: Priority, name: &str) -> Option<Result<Delivery, Error>> {
        loop {
            let held = {
                let mut state = self.state();
                let queue = state.get_mut(name)?;
                match queue.entries.pop_front() {
                    Some(Entry::Message(held)) => held,
                    Some(Entry::Undecodable(error)) => return Some(Err(error)),
                    None => return queue.failure.take().map(Err),
                }
            };
            let visibility = held.queue.visibility;
            let mut left = held.leased_until.saturating_duration_since(Instant::now());
            if left < visibility / 4 {
                tracing::debug!(
                    "Left message #{} to SQS: its claim runs out",
                    held.message.id()
                );
                continue;
            }
            if left < visibility / 2 {
                match self
                    .change_visibility(&held.queue, &held.handle, visibility)
                    .await
                {
                    Ok(true) => left = visibility,
                    Ok(false) => continue,
                    Err(e) => tracing::warn!(
                        "Renewing the claim of message #{} failed - {e}",
                        held.message.id()
                    ),
                }
            }
            let receipt = SqsReceipt {
                queue: held.queue,
                handle: held.handle,
            };
            // The dispatcher extends the claim while the handlers run, from what is left of it.
            let delivery = Delivery::new(held.message, priority, Receipt::new(receipt));
            return Some(Ok(if left.is_zero() {
                delivery
            } else {
                delivery.with_lease(left)
            }));
        }
    }

    /// The next held message of `selected`, highest priority first.
    async fn take_any(&self, selected: &[(Priority, String)]) -> Option<Result<Delivery, Error>> {
        for (priority, name) in selected {
            if let Some(found) = self.take(*priority, name).await {
                return Some(found);
            }
        }
        None
    }

    /// Waits until no poll runs, for at most `limit`.
    async fn polls_ended(&self, limit: Duration) {
        let give_up = Instant::now() + limit;
        loop {
            let changed = pin!(self.inner.changed.notified());
            let mut changed = changed;
            changed.as_mut().enable();
            if !self.state().values().any(|q| q.polling) {
                return;
            }
            if tokio::time::timeout_at(give_up, changed).await.is_err() {
                return;
            }
        }
    }
}

/// Takes every held message out of `state`; undecodable reports still held are logged.
fn drain(state: &mut HashMap<String, QueueState>) -> Vec<Held> {
    let mut held = Vec::new();
    for queue in state.values_mut() {
        for entry in queue.entries.drain(..) {
            match entry {
                Entry::Message(h) => held.push(h),
                Entry::Undecodable(error) => {
                    tracing::error!("Skipping undecodable message - {error}")
                }
            }
        }
        queue.failure = None;
    }
    held
}

/// Where the `SendMessageBatch` request of `bodies` starting at `start` ends: at most ten
/// entries whose bodies together are at most `max_bytes` (always at least one entry).
fn request_end(bodies: &[String], start: usize, max_bytes: usize) -> usize {
    let mut end = start;
    let mut bytes = 0;
    while end < bodies.len() && end - start < MAX_BATCH_SIZE as usize {
        bytes += bodies[end].len();
        if end > start && bytes > max_bytes {
            break;
        }
        end += 1;
    }
    end
}

/// Makes `held` messages visible again at once, ten per request.
async fn give_back(client: &Client, held: Vec<Held>) -> Result<(), Error> {
    let mut by_queue: HashMap<String, Vec<String>> = HashMap::new();
    for h in held {
        by_queue
            .entry(h.queue.url.clone())
            .or_default()
            .push(h.handle);
    }
    let mut first_error = None;
    for (url, handles) in by_queue {
        for chunk in handles.chunks(MAX_BATCH_SIZE as usize) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, handle)| {
                    ChangeMessageVisibilityBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(handle)
                        .visibility_timeout(0)
                        .build()
                        .map_err(|e| Error::driver(NAME, e.to_string(), false))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let result = client
                .change_message_visibility_batch()
                .queue_url(&url)
                .set_entries(Some(entries))
                .send()
                .await;
            if let Err(e) = result {
                first_error.get_or_insert(sdk_error("ChangeMessageVisibilityBatch", e));
            }
        }
    }
    first_error.map_or(Ok(()), Err)
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
        let mut capabilities = Capabilities::all();
        capabilities.fifo = false;
        capabilities.max_payload = Some(self.inner.options.max_payload);
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
        self.send_body(&queue, body, self.delay_for(message)).await
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
                    poll.await
                        .map_err(|e| Error::driver(NAME, format!("poll task: {e}"), true))??;
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

    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        let receipt = delivery.receipt().expect::<SqsReceipt>(NAME)?;
        self.delete(&receipt.queue, &receipt.handle).await
    }

    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        let receipt = delivery.receipt().expect::<SqsReceipt>(NAME)?;
        // A claim that is gone has made the message visible already.
        self.change_visibility(&receipt.queue, &receipt.handle, Duration::ZERO)
            .await
            .map(|_| ())
    }

    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        let receipt = delivery.receipt().expect::<SqsReceipt>(NAME)?;
        if self
            .change_visibility(&receipt.queue, &receipt.handle, by)
            .await?
        {
            Ok(())
        } else {
            Err(Error::InvalidDelivery(
                "the claim expired before it was extended".to_owned(),
            ))
        }
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

#[cfg(test)]
mod tests {
    use super::request_end;

    /// The request boundaries of bodies of `sizes` bytes under `max` bytes per request.
    fn requests(sizes: &[usize], max: usize) -> Vec<usize> {
        let bodies: Vec<String> = sizes.iter().map(|n| "x".repeat(*n)).collect();
        let (mut start, mut lengths) = (0, Vec::new());
        while start < bodies.len() {
            let end = request_end(&bodies, start, max);
            lengths.push(end - start);
            start = end;
        }
        lengths
    }

    #[test]
    fn requests_take_ten_entries_and_max_bytes_at_most() {
        assert_eq!(requests(&[1; 23], 1000), [10, 10, 3]);
        assert_eq!(requests(&[1; 10], 1000), [10]);
        assert_eq!(requests(&[], 1000), Vec::<usize>::new());
        // By size: 40 + 40 + 20 fit 100, the next does not.
        assert_eq!(
            requests(&[40, 40, 20, 1, 100, 100, 99, 1], 100),
            [3, 1, 1, 1, 2]
        );
        // A body of the maximum size goes alone.
        assert_eq!(requests(&[1, 100, 1], 100), [1, 1, 1]);
    }
}
