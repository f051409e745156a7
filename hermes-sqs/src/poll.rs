//! Receiving: `ReceiveMessage` polls in tasks of their own, and the messages this process holds
//! until a `receive` hands them out.

use std::collections::{HashMap, VecDeque};
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::ChangeMessageVisibilityBatchRequestEntry;
use hermes_core::driver::{Delivery, Receipt};
use hermes_core::time::unix_now;
use hermes_core::{Error, Message, Priority};
use tokio::time::Instant;

use crate::driver::{Inner, SqsDriver, lock};
use crate::error::{COMMAND_TIMEOUT, bounded, sdk_error};
use crate::naming::{MAX_QUEUE_NAME_LEN, TARGET_ATTRIBUTE, validate_sqs_queue_name};
use crate::queue::{QueueInfo, whole_seconds};
use crate::{MAX_BATCH_SIZE, NAME};

/// How long before the answer to a `ReceiveMessage` its messages may have been claimed.
const CLAIM_UNCERTAINTY: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
pub(crate) struct HeldQueue {
    /// Taken from SQS, not handed out yet.
    pub(crate) entries: VecDeque<Entry>,
    /// A `ReceiveMessage` on this queue is running.
    pub(crate) polling: bool,
    /// The error of the last long poll, reported by the next `receive` of this queue.
    pub(crate) failure: Option<Error>,
}

#[derive(Debug)]
pub(crate) enum Entry {
    Message(Held),
    /// An undecodable message, already quarantined, still to be reported.
    Undecodable(Error),
}

/// A message claimed on SQS and held by this process.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) message: Message,
    /// The body as SQS holds it, for a dead letter to keep unchanged.
    pub(crate) body: String,
    pub(crate) queue: Arc<QueueInfo>,
    pub(crate) handle: String,
    pub(crate) leased_until: Instant,
}

/// A delivered message's queue and receipt handle, and until when its claim surely lasts.
///
/// SQS may accept an old receipt handle after the message was received again, so the driver
/// fences claims itself: past `leased_until`, the claim may belong to another worker, and
/// `ack`, `nack` and `extend` leave the message alone. `None` for a queue whose visibility
/// timeout is zero, where claims do not last at all.
#[derive(Debug)]
pub(crate) struct SqsReceipt {
    pub(crate) queue: Arc<QueueInfo>,
    /// The body as SQS holds it.
    pub(crate) body: String,
    pub(crate) handle: String,
    pub(crate) leased_until: std::sync::Mutex<Option<Instant>>,
}

impl SqsReceipt {
    /// Whether the claim surely still lasts (always, without a lease).
    pub(crate) fn holds(&self) -> bool {
        lock(&self.leased_until).is_none_or(|until| Instant::now() < until)
    }
}

/// Marks a poll of a queue as running; ends it (and wakes the waiting `receive`s) when dropped,
/// also when the poll panicked.
pub(crate) struct Polling {
    pub(crate) inner: Arc<Inner>,
    pub(crate) name: String,
}

impl Drop for Polling {
    fn drop(&mut self) {
        if let Some(queue) = lock(&self.inner.state).get_mut(&self.name) {
            queue.polling = false;
        }
        self.inner.changed.notify_waiters();
    }
}

impl SqsDriver {
    pub(crate) fn state(&self) -> MutexGuard<'_, HashMap<String, HeldQueue>> {
        lock(&self.inner.state)
    }

    pub(crate) fn push(&self, name: &str, entry: Entry) {
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
    pub(crate) async fn fetch(&self, name: &str, wait_seconds: i32) -> Result<(), Error> {
        self.forward_long_delays_if_due();
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
        let limit = Duration::from_secs(wait_seconds.unsigned_abs().into()) + COMMAND_TIMEOUT;
        let received = bounded("ReceiveMessage", limit, request.send())
            .await?
            .map_err(|e| self.queue_error("ReceiveMessage", name, e))?;
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
                    self.quarantine(&queue, name, &body, &handle, &source)
                        .await?;
                    let error = Error::Undecodable {
                        quarantine: format!("the SQS queue {}", self.inner.quarantine),
                        source,
                    };
                    self.push(name, Entry::Undecodable(error));
                    continue;
                }
            };
            if let Some(at) = decoded.execute_at().filter(|at| *at > unix_now()) {
                // Here before it is due (sent without its delay, or by an earlier version that
                // capped it): on its way again with what is left, then this copy deleted.
                self.route(&queue, body, Some(at)).await?;
                self.delete(&queue, &handle).await?;
                continue;
            }
            self.push(
                name,
                Entry::Message(Held {
                    message: decoded,
                    body,
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
    pub(crate) fn start_poll(
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
    pub(crate) async fn take(
        &self,
        priority: Priority,
        name: &str,
    ) -> Option<Result<Delivery, Error>> {
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
                let asked = Instant::now();
                match self
                    .change_visibility(&held.queue, &held.handle, visibility)
                    .await
                {
                    // Counted from the request: SQS renewed it somewhere before the answer.
                    Ok(true) => left = visibility.saturating_sub(asked.elapsed()),
                    Ok(false) => continue,
                    Err(e) => tracing::warn!(
                        "Renewing the claim of message #{} failed - {e}",
                        held.message.id()
                    ),
                }
            }
            let receipt = SqsReceipt {
                queue: held.queue,
                body: held.body,
                handle: held.handle,
                leased_until: std::sync::Mutex::new(
                    (!visibility.is_zero()).then(|| Instant::now() + left),
                ),
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
    pub(crate) async fn take_any(
        &self,
        selected: &[(Priority, String)],
    ) -> Option<Result<Delivery, Error>> {
        for (priority, name) in selected {
            if let Some(found) = self.take(*priority, name).await {
                return Some(found);
            }
        }
        None
    }

    /// Waits until no poll runs, for at most `limit`.
    pub(crate) async fn polls_ended(&self, limit: Duration) {
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
pub(crate) fn drain(state: &mut HashMap<String, HeldQueue>) -> Vec<Held> {
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

/// Makes `held` messages visible again at once, ten per request.
pub(crate) async fn give_back(client: &Client, held: Vec<Held>) -> Result<(), Error> {
    let mut by_queue: HashMap<String, Vec<String>> = HashMap::new();
    for h in held {
        by_queue
            .entry(h.queue.url.clone())
            .or_default()
            .push(h.handle);
    }
    let mut first_error = None;
    for (url, handles) in by_queue {
        if let Err(e) = make_visible(client, &url, &handles).await {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Makes the claimed messages of the queue at `url` with the receipt `handles` visible again
/// at once, ten per request; goes on past a failed request and returns its error.
pub(crate) async fn make_visible(
    client: &Client,
    url: &str,
    handles: &[String],
) -> Result<(), Error> {
    let mut first_error = None;
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
        let request = client
            .change_message_visibility_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send();
        match bounded("ChangeMessageVisibilityBatch", COMMAND_TIMEOUT, request).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                first_error.get_or_insert(sdk_error("ChangeMessageVisibilityBatch", e));
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

impl SqsDriver {
    /// How often a worker looks at the delay queue: half of `max_delay` (so a message's last
    /// stretch is sent while at least that much of it is left), at most 30 s.
    fn forward_interval(&self) -> Duration {
        (self.inner.options.max_delay / 2).min(Duration::from_secs(30))
    }

    /// Starts moving the messages of the delay queue on, in a task of its own, when the last
    /// look is `forward_interval` old and no move runs.
    pub(crate) fn forward_long_delays_if_due(&self) {
        {
            let mut next = lock(&self.inner.next_forward);
            let now = Instant::now();
            if now < *next {
                return;
            }
            *next = now + self.forward_interval();
        }
        if self.inner.forwarding.swap(true, Ordering::AcqRel) {
            return;
        }
        let driver = self.clone();
        tokio::spawn(async move {
            if let Err(e) = driver.forward_long_delays().await {
                tracing::warn!("Moving delayed messages on failed, trying again later - {e}");
            }
            driver.inner.forwarding.store(false, Ordering::Release);
        });
    }

    /// Sends what became visible in the delay queue on (to its queue, or back to the delay
    /// queue while more than `max_delay` is left), deleting each copy after it was sent; goes
    /// on while batches come back full (up to 1,000 of them).
    async fn forward_long_delays(&self) -> Result<(), Error> {
        let delay = self.resolve(&self.inner.delay_queue).await?;
        for _ in 0..1_000 {
            let request = self
                .inner
                .client
                .receive_message()
                .queue_url(&delay.url)
                .max_number_of_messages(MAX_BATCH_SIZE)
                .wait_time_seconds(0)
                .message_attribute_names(TARGET_ATTRIBUTE)
                .send();
            let received = bounded("ReceiveMessage", COMMAND_TIMEOUT, request)
                .await?
                .map_err(|e| self.queue_error("ReceiveMessage", &delay.name, e))?;
            let messages = received.messages.unwrap_or_default();
            let full = messages.len() >= MAX_BATCH_SIZE as usize;
            for message in messages {
                let target = message
                    .message_attributes()
                    .and_then(|a| a.get(TARGET_ATTRIBUTE))
                    .and_then(|v| v.string_value())
                    .filter(|name| validate_sqs_queue_name(name, MAX_QUEUE_NAME_LEN).is_ok())
                    .unwrap_or(&self.inner.queue)
                    .to_owned();
                let (Some(body), Some(handle)) = (message.body, message.receipt_handle) else {
                    continue;
                };
                match self.inner.serializer.deserialize(body.as_bytes()) {
                    Ok(decoded) => {
                        let target = self.resolve(&target).await?;
                        self.route(&target, body, decoded.execute_at()).await?;
                        self.delete(&delay, &handle).await?;
                    }
                    Err(source) => {
                        self.quarantine(&delay, &target, &body, &handle, &source)
                            .await?;
                        tracing::error!("Skipping undecodable message - {source}");
                    }
                }
            }
            if !full {
                return Ok(());
            }
        }
        Ok(())
    }
}
