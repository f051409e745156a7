//! The dead letters of a priority queue: the queue `<queue>.quarantine`, where undecodable
//! bodies always went, now holding every dead letter of that priority queue. A dead letter is
//! the message's body exactly as it was delivered, with its reason in AMQP headers:
//!
//! | header               | value                                               |
//! |----------------------|-----------------------------------------------------|
//! | `x-hermes-dead-id`   | the message id, or one given to an undecodable body |
//! | `x-hermes-dead-kind` | `failed`, `rejected` or `undecodable`               |
//! | `x-hermes-dead-error`| the last error, or the decoder's reason             |
//! | `x-hermes-dead-handler` | the handler that failed (absent for undecodable) |
//! | `x-hermes-dead-at`   | when, Unix seconds (a double)                       |
//! | `x-hermes-dead-retries` | the retries the message had                      |
//! | `x-hermes-priority`  | the priority of the queue it came from              |
//!
//! A body quarantined by an earlier version has no headers: it is an undecodable dead letter
//! whose time is unknown, and whose id is made from its bytes' digest.
//!
//! Retention: a new dead-letter queue is declared with `x-max-length` (the retention's count)
//! and `x-overflow: drop-head`, so the broker drops the oldest beyond the count, exactly. One
//! that exists with other arguments (an earlier version declared it without any, or the count
//! changed since) keeps them (the broker refuses to change a queue's arguments), and the
//! driver drops its oldest beyond the count itself, each time it adds a letter. Age is the
//! driver's (the broker's `x-message-ttl` cannot hold 180 days): adding a letter drops the
//! oldest ones past the retention's age, and listing or replaying drops every one past it
//! that it meets.

use std::collections::HashMap;
use std::sync::Mutex;

use hermes_core::inspect::{DeadKind, DeadLetter, DeadReason, Retention};
use hermes_core::time::unix_now;
use hermes_core::{Error, Priority};
use lapin::message::Delivery;
use lapin::types::{AMQPValue, FieldTable, LongString};

use crate::driver::RabbitMqDriver;
use crate::naming::quarantine_queue;
use crate::scratch::Scratch;
use crate::session::{Session, bounded};

/// The header holding a dead letter's id.
pub const DEAD_ID: &str = "x-hermes-dead-id";
/// The header holding why a message is dead: `failed`, `rejected` or `undecodable`.
pub const DEAD_KIND: &str = "x-hermes-dead-kind";
/// The header holding a dead letter's error text.
pub const DEAD_ERROR: &str = "x-hermes-dead-error";
/// The header holding the name of the handler that failed.
pub const DEAD_HANDLER: &str = "x-hermes-dead-handler";
/// The header holding when a message died, as Unix seconds.
pub const DEAD_AT: &str = "x-hermes-dead-at";
/// The header holding how many times a dead message had been retried.
pub const DEAD_RETRIES: &str = "x-hermes-dead-retries";
/// The header holding the priority of the queue a dead letter came from.
pub const PRIORITY: &str = "x-hermes-priority";

/// Per dead-letter queue a session declared: whether the broker caps its length.
#[derive(Debug, Default)]
pub(crate) struct Stores(Mutex<HashMap<String, bool>>);

impl Stores {
    fn get(&self, store: &str) -> Option<bool> {
        self.lock().get(store).copied()
    }

    fn note(&self, store: &str, capped_by_broker: bool) {
        self.lock().insert(store.to_owned(), capped_by_broker);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, bool>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A dead letter read back from its queue.
pub(crate) struct Stored {
    pub(crate) letter: DeadLetter,
    /// Its body, as it was delivered.
    pub(crate) body: Vec<u8>,
    /// Whether its time is known (an earlier version's quarantine did not record it).
    dated: bool,
}

impl Stored {
    /// Whether `retention` drops it for its age.
    pub(crate) fn expired(&self, retention: &Retention) -> bool {
        self.dated && self.letter.reason.at < unix_now() - retention.max_age.as_secs_f64()
    }
}

/// The headers of a dead letter `id` of the queue of `priority`, dead for `reason`.
fn headers(id: &str, priority: Priority, reason: &DeadReason, mut table: FieldTable) -> FieldTable {
    let text = |s: &str| AMQPValue::LongString(LongString::from(s));
    table.insert(DEAD_ID.into(), text(id));
    table.insert(DEAD_KIND.into(), text(reason.kind.as_str()));
    table.insert(DEAD_ERROR.into(), text(&reason.error));
    if let Some(handler) = &reason.handler {
        table.insert(DEAD_HANDLER.into(), text(handler));
    }
    table.insert(DEAD_AT.into(), AMQPValue::Double(reason.at));
    table.insert(
        DEAD_RETRIES.into(),
        AMQPValue::LongLongInt(i64::from(reason.retries)),
    );
    table.insert(PRIORITY.into(), AMQPValue::LongLongInt(i64::from(priority)));
    table
}

fn header<'a>(delivery: &'a Delivery, name: &str) -> Option<&'a AMQPValue> {
    delivery.properties.headers().as_ref()?.inner().get(name)
}

fn text_header(delivery: &Delivery, name: &str) -> Option<String> {
    match header(delivery, name)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
        _ => None,
    }
}

fn number_header(delivery: &Delivery, name: &str) -> Option<f64> {
    Some(match header(delivery, name)? {
        AMQPValue::Double(v) => *v,
        AMQPValue::Float(v) => f64::from(*v),
        AMQPValue::LongLongInt(v) => *v as f64,
        AMQPValue::LongInt(v) => f64::from(*v),
        AMQPValue::LongUInt(v) => f64::from(*v),
        AMQPValue::ShortInt(v) => f64::from(*v),
        AMQPValue::ShortUInt(v) => f64::from(*v),
        AMQPValue::ShortShortInt(v) => f64::from(*v),
        AMQPValue::ShortShortUInt(v) => f64::from(*v),
        AMQPValue::Timestamp(v) => *v as f64,
        _ => return None,
    })
}

fn kind_named(name: &str) -> DeadKind {
    match name {
        "rejected" => DeadKind::Rejected,
        "undecodable" => DeadKind::Undecodable,
        _ => DeadKind::Failed,
    }
}

impl RabbitMqDriver {
    /// Reads a dead letter of the queue of `priority` from `delivery`, taken off its
    /// dead-letter queue.
    pub(crate) fn read_dead(&self, priority: Priority, delivery: Delivery) -> Stored {
        let decoded = self.inner.serializer.deserialize(&delivery.data);
        let (id, reason, dated) = match text_header(&delivery, DEAD_KIND) {
            Some(kind) => {
                let mut reason = DeadReason::new(
                    kind_named(&kind),
                    text_header(&delivery, DEAD_ERROR).unwrap_or_default(),
                );
                reason.handler = text_header(&delivery, DEAD_HANDLER);
                let at = number_header(&delivery, DEAD_AT);
                reason.at = at.unwrap_or(0.0);
                reason.retries = number_header(&delivery, DEAD_RETRIES)
                    .map_or(0, |r| r.clamp(0.0, f64::from(u32::MAX)) as u32);
                let id = text_header(&delivery, DEAD_ID).unwrap_or_default();
                (id, reason, at.is_some())
            }
            None => {
                // Quarantined by an earlier version: undecodable, at an unknown time.
                let (id, error) = match &decoded {
                    Ok(message) => (message.id().to_owned(), "quarantined".to_owned()),
                    Err(e) => (format!("undecodable-{}", e.sha256_prefix()), e.to_string()),
                };
                let mut reason = DeadReason::new(DeadKind::Undecodable, error);
                reason.at = 0.0;
                (id, reason, false)
            }
        };
        let letter = DeadLetter::new(id, priority, reason).with_message(decoded.ok());
        Stored {
            letter,
            body: delivery.data,
            dated,
        }
    }

    /// Declares the dead-letter queue of `home` on `session` (once per session) and returns
    /// its name.
    async fn dead_store(&self, session: &Session, home: &str) -> Result<String, Error> {
        let store = quarantine_queue(home);
        if session.dead_stores.get(&store).is_some() {
            return Ok(store);
        }
        let count = self.inner.options.retention.max_count;
        let mut arguments = FieldTable::default();
        arguments.insert(
            "x-max-length".into(),
            AMQPValue::LongLongInt(i64::try_from(count).unwrap_or(i64::MAX)),
        );
        arguments.insert(
            "x-overflow".into(),
            AMQPValue::LongString(LongString::from("drop-head")),
        );
        let mut scratch = Scratch::new(session);
        let declared = scratch
            .declare(&store, self.inner.options.durable, arguments)
            .await;
        scratch.finish().await?;
        let capped_by_broker = declared?;
        if !capped_by_broker {
            tracing::info!(
                "The dead-letter queue {store} exists with other arguments (an earlier version \
                 declared it, or the retention changed): the driver drops its oldest letters \
                 beyond {count} itself"
            );
        }
        session.dead_stores.note(&store, capped_by_broker);
        Ok(store)
    }

    /// Adds `body` (the message `id`, as it was delivered) to the dead letters of the queue
    /// `home` of `priority` with `reason`, once the broker confirmed it, then applies the
    /// retention (a failure of that is logged: the letter is kept either way).
    pub(crate) async fn bury(
        &self,
        session: &Session,
        (home, priority): (&str, Priority),
        id: &str,
        body: &[u8],
        reason: &DeadReason,
    ) -> Result<(), Error> {
        let store = self.dead_store(session, home).await?;
        let properties = self.inner.options.published_properties();
        let table = properties.headers().clone().unwrap_or_default();
        let properties = properties.with_headers(headers(id, priority, reason, table));
        let publish = session.publish(&store, body, properties);
        bounded("dead-lettering", Some(session), publish).await?;
        // The letter is kept: a retention that fails now is applied at the next addition.
        if let Err(error) = self.trim_dead(session, &store, priority).await {
            tracing::warn!("Applying the retention of {store} failed: {error}");
        }
        Ok(())
    }

    /// Drops the dead letters at the head of `store` that the retention does not keep: those
    /// too old, and those beyond the count when the broker does not cap it.
    async fn trim_dead(
        &self,
        session: &Session,
        store: &str,
        priority: Priority,
    ) -> Result<(), Error> {
        let retention = self.inner.options.retention;
        let capped_by_broker = session.dead_stores.get(store).unwrap_or(false);
        let mut scratch = Scratch::new(session);
        let trimmed = async {
            while let Some((delivery, left)) = scratch.take(store).await? {
                let over = !capped_by_broker && left as usize >= retention.max_count;
                let tag = delivery.acker.clone();
                if over || self.read_dead(priority, delivery).expired(&retention) {
                    scratch.remove(&tag).await?;
                } else {
                    break;
                }
            }
            Ok::<_, Error>(())
        }
        .await;
        let finished = scratch.finish().await;
        trimmed?;
        finished
    }
}
