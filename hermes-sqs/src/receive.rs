//! Receiving: `ReceiveMessage` polls in tasks of their own, and the messages this process holds
//! until a `receive` hands them out.

use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_core::driver::{Delivery, Receipt};
use hermes_core::time::unix_now;
use hermes_core::{Error, Priority};
use tokio::time::Instant;

use crate::api::{SQS_CALL_TIMEOUT, change_visibility, delete, sdk_call, whole_seconds};
use crate::core::{Core, Entry, Held, SqsReceipt, lock};

/// How far past the deadline of a `receive` a long poll may end, so that a wait of one second
/// still gets a one-second long poll.
const POLL_SLACK: Duration = Duration::from_millis(50);

/// How long before the answer to a `ReceiveMessage` its messages may have been claimed.
const CLAIM_UNCERTAINTY: Duration = Duration::from_secs(1);

/// Marks a poll of a queue as running; ends it (and wakes the waiting `receive`s) when dropped,
/// also when the poll panicked.
struct Polling {
    core: Arc<Core>,
    name: String,
}

impl Drop for Polling {
    fn drop(&mut self) {
        if let Some(queue) = lock(&self.core.state).get_mut(&self.name) {
            queue.polling = false;
        }
        self.core.changed.notify_waiters();
    }
}

impl Core {
    pub(crate) async fn receive(
        self: &Arc<Self>,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        let selected = self.queues.selected(priorities)?;
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
            let changed = pin!(self.changed.notified());
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
                .min(self.options.wait_time)
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

    fn push(&self, name: &str, entry: Entry) {
        self.state()
            .entry(name.to_owned())
            .or_default()
            .entries
            .push_back(entry);
        self.changed.notify_waiters();
    }

    /// One `ReceiveMessage` on the queue called `name`, waiting up to `wait_seconds`: decoded
    /// messages that are due go to the buffer, early ones are delayed again, undecodable ones
    /// are quarantined (and reported through the buffer).
    async fn fetch(self: &Arc<Self>, name: &str, wait_seconds: i32) -> Result<(), Error> {
        self.forward_long_delays_if_due();
        let queue = self.resolve(name).await?;
        let mut request = self
            .client
            .receive_message()
            .queue_url(&queue.url)
            .max_number_of_messages(self.options.batch_size)
            .wait_time_seconds(wait_seconds);
        if let Some(visibility) = self.options.visibility_timeout {
            request = request.visibility_timeout(whole_seconds(visibility));
        }
        let asked = Instant::now();
        let limit = Duration::from_secs(wait_seconds.unsigned_abs().into()) + SQS_CALL_TIMEOUT;
        let received = sdk_call("ReceiveMessage", limit, request.send())
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
            let decoded = match self.serializer.deserialize(body.as_bytes()) {
                Ok(decoded) => decoded,
                Err(source) => {
                    self.quarantine(&queue, name, &body, &handle, &source)
                        .await?;
                    let error = Error::Undecodable {
                        quarantine: format!("the SQS queue {}", self.quarantine),
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
                delete(&self.client, &queue, &handle).await?;
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
    fn start_poll(
        self: &Arc<Self>,
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
            core: self.clone(),
            name: name.to_owned(),
        };
        Some(tokio::spawn(async move {
            let core = &polling.core;
            let result = core.fetch(&polling.name, wait_seconds).await;
            let outcome = {
                let mut state = core.state();
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
                let asked = Instant::now();
                match change_visibility(&self.client, &held.queue, &held.handle, visibility).await {
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
                leased_until: Mutex::new((!visibility.is_zero()).then(|| Instant::now() + left)),
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
    pub(crate) async fn polls_ended(&self, limit: Duration) {
        let give_up = Instant::now() + limit;
        loop {
            let changed = pin!(self.changed.notified());
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
