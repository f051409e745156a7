//! The dead-letter queue `<queue>-quarantine`: how a dead letter is kept there (its body
//! unchanged, its reason in message attributes), reading all of it (SQS has no peek), listing
//! and replaying, and the count cap.
//!
//! One dead-letter queue serves every priority queue of a driver: each letter names the queue
//! it came from in [`QUEUE_ATTRIBUTE`]. PHP Hermes never reads it; the priority queues keep
//! Hermes' plain JSON bodies.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use aws_sdk_sqs::types::{MessageAttributeValue, MessageSystemAttributeName};
use hermes_core::driver::{DeadLetters, Delivery, async_trait};
use hermes_core::inspect::{DeadKind, DeadLetter, DeadReason, Replay};
use hermes_core::{DEFAULT_PRIORITY, DecodeError, Error, Priority};

use crate::api::{QueueInfo, SQS_CALL_TIMEOUT, counts, delete, delete_all, make_visible, sdk_call};
use crate::core::{Core, SqsReceipt};
use crate::error::sdk_error;
use crate::{MAX_BATCH_SIZE, NAME};

/// The message attribute holding why a letter is dead: `failed`, `rejected` or `undecodable`.
pub const KIND_ATTRIBUTE: &str = "HermesDeadKind";
/// The message attribute holding the error text (at most [`MAX_ERROR_LEN`] bytes).
pub const ERROR_ATTRIBUTE: &str = "HermesDeadError";
/// The message attribute holding the name of the handler that failed, when there was one.
pub const HANDLER_ATTRIBUTE: &str = "HermesDeadHandler";
/// The message attribute holding when the letter died, as Unix seconds (a `Number`).
pub const AT_ATTRIBUTE: &str = "HermesDeadAt";
/// The message attribute holding how many times the message had been retried (a `Number`).
pub const RETRIES_ATTRIBUTE: &str = "HermesDeadRetries";
/// The message attribute naming the queue the letter came from.
pub const QUEUE_ATTRIBUTE: &str = "HermesDeadQueue";

/// The longest error text kept with a dead letter, in bytes; a longer one is cut (SQS counts
/// attributes in a message's size).
pub const MAX_ERROR_LEN: usize = 1024;

/// The longest handler name kept with a dead letter, in bytes.
const MAX_HANDLER_LEN: usize = 256;

/// How long a reading of the dead-letter queue hides the letters it received from other
/// readers, at most (they are made visible again as soon as it is done).
pub(crate) const READING_VISIBILITY: Duration = Duration::from_secs(30);

/// A dead letter as received from the dead-letter queue, hidden until released or deleted.
#[derive(Debug)]
pub(crate) struct StoredLetter {
    /// SQS's id of the letter: the id of an undecodable one.
    pub(crate) message_id: String,
    pub(crate) handle: String,
    pub(crate) body: String,
    pub(crate) reason: DeadReason,
    /// The queue it came from; `None` for a letter kept before the queue was recorded (those
    /// belong to the default queue).
    pub(crate) queue: Option<String>,
}

impl StoredLetter {
    /// Whether the letter belongs to the queue called `name`, of `priority`.
    pub(crate) fn belongs_to(&self, priority: Priority, name: &str) -> bool {
        match &self.queue {
            Some(queue) => queue == name,
            None => priority == DEFAULT_PRIORITY,
        }
    }
}

/// The whole dead-letter queue as one reading received it: every letter hidden from other
/// readers until [`release`](Core::release) or deletion.
pub(crate) struct Reading {
    pub(crate) store: Arc<QueueInfo>,
    pub(crate) letters: Vec<StoredLetter>,
}

/// `text` as SQS takes it in a string attribute: characters XML does not allow replaced, cut
/// at `max` bytes on a character boundary.
fn attribute_text(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for c in text.chars() {
        let c = if matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}')
            || c >= '\u{10000}'
        {
            c
        } else {
            '\u{FFFD}'
        };
        if out.len() + c.len_utf8() > max {
            break;
        }
        out.push(c);
    }
    out
}

fn attribute(data_type: &str, value: String) -> Result<MessageAttributeValue, Error> {
    MessageAttributeValue::builder()
        .data_type(data_type)
        .string_value(value)
        .build()
        .map_err(|e| Error::driver(NAME, e.to_string(), false))
}

/// The message attributes of a letter from the queue `queue` dead for `reason`. Empty texts
/// are left out (SQS refuses empty attribute values).
fn reason_attributes(
    reason: &DeadReason,
    queue: &str,
) -> Result<HashMap<String, MessageAttributeValue>, Error> {
    let mut attributes = HashMap::new();
    attributes.insert(
        KIND_ATTRIBUTE.to_owned(),
        attribute("String", reason.kind.as_str().to_owned())?,
    );
    let error = attribute_text(&reason.error, MAX_ERROR_LEN);
    if !error.is_empty() {
        attributes.insert(ERROR_ATTRIBUTE.to_owned(), attribute("String", error)?);
    }
    if let Some(handler) = &reason.handler {
        let handler = attribute_text(handler, MAX_HANDLER_LEN);
        if !handler.is_empty() {
            attributes.insert(HANDLER_ATTRIBUTE.to_owned(), attribute("String", handler)?);
        }
    }
    let at = if reason.at.is_finite() {
        reason.at
    } else {
        0.0
    };
    attributes.insert(
        AT_ATTRIBUTE.to_owned(),
        attribute("Number", format!("{at:.6}"))?,
    );
    attributes.insert(
        RETRIES_ATTRIBUTE.to_owned(),
        attribute("Number", reason.retries.to_string())?,
    );
    attributes.insert(
        QUEUE_ATTRIBUTE.to_owned(),
        attribute("String", queue.to_owned())?,
    );
    Ok(attributes)
}

/// The letter of a message received from the dead-letter queue. A message without the
/// attributes (kept before they were written, or put there by another program) is an
/// undecodable letter without a recorded reason, dated when SQS got it.
fn stored_letter(message: aws_sdk_sqs::types::Message) -> Option<StoredLetter> {
    let attributes = message.message_attributes.unwrap_or_default();
    let text = |name: &str| {
        attributes
            .get(name)
            .and_then(|v| v.string_value())
            .map(str::to_owned)
    };
    let sent_at = message
        .attributes
        .as_ref()
        .and_then(|a| a.get(&MessageSystemAttributeName::SentTimestamp))
        .and_then(|ms| ms.parse::<f64>().ok())
        .map_or(0.0, |ms| ms / 1000.0);
    let reason = match text(KIND_ATTRIBUTE).as_deref() {
        None => {
            let mut reason = DeadReason::new(DeadKind::Undecodable, "no reason recorded");
            reason.at = sent_at;
            reason
        }
        Some(kind) => {
            let kind = kind.parse().unwrap_or(DeadKind::Undecodable);
            let mut reason = DeadReason::new(kind, text(ERROR_ATTRIBUTE).unwrap_or_default());
            reason.handler = text(HANDLER_ATTRIBUTE);
            reason.at = text(AT_ATTRIBUTE)
                .and_then(|at| at.parse().ok())
                .unwrap_or(sent_at);
            reason.retries = text(RETRIES_ATTRIBUTE)
                .and_then(|r| r.parse().ok())
                .unwrap_or(0);
            reason
        }
    };
    Some(StoredLetter {
        message_id: message.message_id?,
        handle: message.receipt_handle?,
        body: message.body?,
        reason,
        queue: text(QUEUE_ATTRIBUTE),
    })
}

#[async_trait]
impl DeadLetters for Core {
    /// Sends the delivery's body, unchanged, to the dead-letter queue with `reason` in its
    /// attributes, then deletes the delivery. A delivery whose claim ran out is left alone, as
    /// `ack` leaves it.
    async fn add(&self, delivery: &Delivery, reason: &DeadReason) -> Result<(), Error> {
        let Some(receipt) = SqsReceipt::lasting(delivery, "failed")? else {
            return Ok(());
        };
        self.bury(
            &receipt.queue,
            &receipt.queue.name,
            &receipt.body,
            &receipt.handle,
            reason,
        )
        .await
    }

    /// Receives the whole dead-letter queue, hiding it from other readers for a moment; see
    /// [`SqsDriver`](crate::SqsDriver).
    async fn list(&self, priority: Priority, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        let name = self.queues.get(priority)?;
        let Some(reading) = self.read_store().await? else {
            return Ok(Vec::new());
        };
        let letters = reading
            .letters
            .iter()
            .filter(|l| l.belongs_to(priority, &name))
            .take(limit)
            .map(|l| self.letter(l, priority))
            .collect();
        self.release(reading).await;
        Ok(letters)
    }

    async fn replay(&self, priority: Priority, replay: &Replay) -> Result<u64, Error> {
        let name = self.queues.get(priority)?;
        let Some(reading) = self.read_store().await? else {
            return Ok(0);
        };
        let Reading { store, letters } = reading;
        let target = match self.resolve(&name).await {
            Ok(target) => target,
            Err(e) => {
                self.release(Reading { store, letters }).await;
                return Err(e);
            }
        };
        let mut replayed = 0;
        let mut kept = Vec::new();
        let mut letters = letters.into_iter();
        while let Some(stored) = letters.next() {
            let letter = self.letter(&stored, priority);
            if !stored.belongs_to(priority, &name) || !replay.selects(&letter) {
                kept.push(stored);
                continue;
            }
            let sent = match &letter.message {
                Some(message) => match self.encode(&replay.replayed(message)) {
                    Ok(body) => self.send_body(&target, body, 0).await,
                    Err(e) => Err(e),
                },
                // An undecodable letter goes back as it was.
                None => self.send_body(&target, stored.body.clone(), 0).await,
            };
            let done = match sent {
                Ok(()) => delete(&self.client, &store, &stored.handle).await,
                Err(e) => Err(e),
            };
            if let Err(e) = done {
                kept.push(stored);
                kept.extend(letters);
                self.release(Reading {
                    store,
                    letters: kept,
                })
                .await;
                return Err(e);
            }
            replayed += 1;
        }
        self.release(Reading {
            store,
            letters: kept,
        })
        .await;
        if replayed > 0 {
            tracing::info!(queue = %name, "Replayed {replayed} dead letters");
        }
        Ok(replayed)
    }
}

impl Core {
    /// The dead letter `stored` is, listed under `priority`.
    fn letter(&self, stored: &StoredLetter, priority: Priority) -> DeadLetter {
        let message = self.serializer.deserialize(stored.body.as_bytes()).ok();
        DeadLetter::new(stored.message_id.clone(), priority, stored.reason.clone())
            .with_message(message)
    }

    /// Keeps the claimed message `body` of `from` (the queue called `origin`, which the letter
    /// belongs to) as a dead letter for `reason`: sent to the dead-letter queue first, then
    /// deleted from `from`; then the count cap is applied.
    pub(crate) async fn bury(
        &self,
        from: &QueueInfo,
        origin: &str,
        body: &str,
        handle: &str,
        reason: &DeadReason,
    ) -> Result<(), Error> {
        let store = self.resolve(&self.quarantine).await?;
        let request = self
            .client
            .send_message()
            .queue_url(&store.url)
            .message_body(body)
            .set_message_attributes(Some(reason_attributes(reason, origin)?))
            .send();
        sdk_call("SendMessage", SQS_CALL_TIMEOUT, request)
            .await?
            .map_err(|e| sdk_error("SendMessage", e))?;
        delete(&self.client, from, handle).await?;
        if let Err(e) = self.cap_count(&store).await {
            tracing::warn!("Applying the dead letters' count cap failed - {e}");
        }
        Ok(())
    }

    /// Moves an undecodable message of `from` (bound for the queue called `origin`) to the
    /// dead-letter queue, with the decoder's reason (never the body).
    pub(crate) async fn quarantine(
        &self,
        from: &QueueInfo,
        origin: &str,
        body: &str,
        handle: &str,
        source: &DecodeError,
    ) -> Result<(), Error> {
        let reason = DeadReason::new(DeadKind::Undecodable, source.to_string());
        self.bury(from, origin, body, handle, &reason).await?;
        tracing::warn!(
            queue = %from.name,
            quarantine = %self.quarantine,
            "Moved an undecodable message from {} to {}",
            from.name,
            self.quarantine
        );
        Ok(())
    }

    /// One receive of up to ten letters of the dead-letter queue, hidden for `visibility`,
    /// waiting up to `wait_seconds` for the first.
    async fn receive_letters(
        &self,
        store: &QueueInfo,
        max: i32,
        wait_seconds: i32,
        visibility: Duration,
    ) -> Result<Vec<StoredLetter>, Error> {
        let request = self
            .client
            .receive_message()
            .queue_url(&store.url)
            .max_number_of_messages(max)
            .wait_time_seconds(wait_seconds)
            .visibility_timeout(i32::try_from(visibility.as_secs()).unwrap_or(i32::MAX))
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
            .send();
        let limit = Duration::from_secs(wait_seconds.unsigned_abs().into()) + SQS_CALL_TIMEOUT;
        let received = sdk_call("ReceiveMessage", limit, request)
            .await?
            .map_err(|e| sdk_error("ReceiveMessage", e))?;
        Ok(received
            .messages
            .unwrap_or_default()
            .into_iter()
            .filter_map(stored_letter)
            .collect())
    }

    /// Receives every letter of the dead-letter queue, each once (a letter received twice keeps
    /// its latest receipt), oldest first; `None` when the queue does not exist. Goes on until a
    /// receive (a long poll of 1 s) brings nothing new, for at most
    /// `retention.max_count / 10 + 100` receives. The letters stay hidden from other readers
    /// until released or deleted, for [`READING_VISIBILITY`] and two seconds per ten letters
    /// the queue holds (so the first ones are still hidden when the last arrive), 12 hours at
    /// most.
    pub(crate) async fn read_store(&self) -> Result<Option<Reading>, Error> {
        let Some(url) = self.existing(&self.quarantine).await? else {
            return Ok(None);
        };
        let [held, _, _] = counts(&self.client, &url).await?;
        let visibility = (READING_VISIBILITY + Duration::from_secs(2 * (held / 10 + 1)))
            .min(Duration::from_secs(12 * 3600));
        let store = self.resolve(&self.quarantine).await?;
        let mut letters: Vec<StoredLetter> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let rounds = self.options.retention.max_count / MAX_BATCH_SIZE as usize + 100;
        for _ in 0..rounds {
            let batch = match self
                .receive_letters(&store, MAX_BATCH_SIZE, 1, visibility)
                .await
            {
                Ok(batch) => batch,
                Err(e) => {
                    self.release(Reading { store, letters }).await;
                    return Err(e);
                }
            };
            let mut new = false;
            for letter in batch {
                match index.get(&letter.message_id) {
                    Some(&at) => letters[at].handle = letter.handle,
                    None => {
                        index.insert(letter.message_id.clone(), letters.len());
                        letters.push(letter);
                        new = true;
                    }
                }
            }
            if !new {
                break;
            }
        }
        letters.sort_by(|a, b| {
            a.reason
                .at
                .total_cmp(&b.reason.at)
                .then_with(|| a.message_id.cmp(&b.message_id))
        });
        Ok(Some(Reading { store, letters }))
    }

    /// Makes the letters of `reading` visible again; a failure is logged (they come back by
    /// themselves after [`READING_VISIBILITY`]).
    pub(crate) async fn release(&self, reading: Reading) {
        let handles: Vec<String> = reading.letters.into_iter().map(|l| l.handle).collect();
        if let Err(e) = make_visible(&self.client, &reading.store.url, &handles).await {
            tracing::warn!("Making dead letters visible again failed - {e}");
        }
    }

    /// Drops the oldest letters of what one receive sees while SQS's approximate count of the
    /// dead-letter queue is over `retention.max_count`: at most ten receives, so a lowered cap
    /// is reached over several calls. One trim at a time per process: dead letters buried
    /// meanwhile leave it to the running one. SQS's count lags behind on AWS, so a burst of dead
    /// letters may still drop a few more than the excess.
    async fn cap_count(&self, store: &QueueInfo) -> Result<(), Error> {
        /// Ends the trim when dropped, even when the future is.
        struct Trimming<'a>(&'a AtomicBool);
        impl Drop for Trimming<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        if self.trimming.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let _trimming = Trimming(&self.trimming);
        self.trim(store).await
    }

    async fn trim(&self, store: &QueueInfo) -> Result<(), Error> {
        let max = self.options.retention.max_count as u64;
        let mut excess = counts(&self.client, &store.url)
            .await?
            .iter()
            .sum::<u64>()
            .saturating_sub(max);
        for _ in 0..10 {
            if excess == 0 {
                return Ok(());
            }
            let mut batch = self
                .receive_letters(store, MAX_BATCH_SIZE, 0, READING_VISIBILITY)
                .await?;
            if batch.is_empty() {
                return Ok(());
            }
            batch.sort_by(|a, b| a.reason.at.total_cmp(&b.reason.at));
            let dropped = (excess as usize).min(batch.len());
            let kept = batch.split_off(dropped);
            let handles: Vec<String> = batch.into_iter().map(|l| l.handle).collect();
            delete_all(&self.client, store, &handles).await?;
            let kept: Vec<String> = kept.into_iter().map(|l| l.handle).collect();
            make_visible(&self.client, &store.url, &kept).await?;
            tracing::info!(
                quarantine = %store.name,
                "Dropped the {dropped} oldest dead letters seen, over the cap of {max}"
            );
            excess -= dropped as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_texts_are_cut_and_cleaned() {
        assert_eq!(attribute_text("disk full", 100), "disk full");
        assert_eq!(attribute_text("a\u{0}b", 100), "a\u{FFFD}b");
        assert_eq!(attribute_text("ééé", 5), "éé");
        assert_eq!(attribute_text(&"x".repeat(2000), MAX_ERROR_LEN).len(), 1024);
    }

    #[test]
    fn reasons_fit_in_attributes() {
        let reason = DeadReason::new(DeadKind::Failed, "").with_handler("Archiver");
        let attributes = reason_attributes(&reason, "jobs").unwrap();
        assert!(!attributes.contains_key(ERROR_ATTRIBUTE), "empty left out");
        assert_eq!(attributes.len(), 5);
        assert!(attributes.len() <= 10, "SQS takes at most 10 attributes");
        assert_eq!(
            attributes[QUEUE_ATTRIBUTE].string_value(),
            Some("jobs"),
            "the queue it came from"
        );
    }
}
