//! The dead letters of a priority queue: the queue `<queue>.quarantine`, where undecodable
//! bodies always went, now holding every dead letter of that priority queue, listed and
//! replayed with `basic.get`, giving back what is not removed. A dead letter is the message's
//! body exactly as it was delivered, with its reason in AMQP headers:
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

use hermes_core::driver::{DeadLetters, Delivery, async_trait};
use hermes_core::inspect::{DeadKind, DeadLetter, DeadReason, Replay, Retention};
use hermes_core::time::unix_now;
use hermes_core::{Error, Priority};
use lapin::Acker;
use lapin::message::Delivery as AmqpDelivery;
use lapin::types::{AMQPValue, FieldTable, LongString};

use crate::NAME;
use crate::amqp::{Scratch, Session};
use crate::core::{Core, RabbitReceipt};
use crate::naming::{
    DEAD_AT, DEAD_ERROR, DEAD_HANDLER, DEAD_ID, DEAD_KIND, DEAD_RETRIES, PRIORITY, quarantine_queue,
};

/// A dead letter read back from its queue.
struct Stored {
    letter: DeadLetter,
    /// Its body, as it was delivered.
    body: Vec<u8>,
    /// Whether its time is known (an earlier version's quarantine did not record it).
    dated: bool,
}

impl Stored {
    /// Whether `retention` drops it for its age.
    fn expired(&self, retention: &Retention) -> bool {
        self.dated && self.letter.reason.at < unix_now() - retention.max_age.as_secs_f64()
    }
}

/// A walk through the dead letters of one dead-letter queue, on a scratch channel of its own:
/// each letter taken with `basic.get`, and what the walk took and did not remove given back
/// to its place when its scratch finishes.
struct DeadWalk<'s> {
    scratch: Scratch<'s>,
    store: String,
    priority: Priority,
    /// How many letters are left to meet, known from the first take: the letters there when
    /// the walk began, no more, so one added meanwhile is not met again.
    budget: Option<u32>,
}

impl<'s> DeadWalk<'s> {
    /// A walk through `store`, the dead-letter queue of the queue of `priority`, on `session`.
    fn new(session: &'s Session, store: String, priority: Priority) -> Self {
        DeadWalk {
            scratch: Scratch::new(session),
            store,
            priority,
            budget: None,
        }
    }

    /// Gives back what the walk took and did not remove, then returns `outcome` (its error
    /// before one of giving back).
    async fn finish<T>(self, outcome: Result<T, Error>) -> Result<T, Error> {
        let finished = self.scratch.finish().await;
        let value = outcome?;
        finished?;
        Ok(value)
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

fn header<'a>(delivery: &'a AmqpDelivery, name: &str) -> Option<&'a AMQPValue> {
    delivery.properties.headers().as_ref()?.inner().get(name)
}

fn text_header(delivery: &AmqpDelivery, name: &str) -> Option<String> {
    match header(delivery, name)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
        _ => None,
    }
}

fn number_header(delivery: &AmqpDelivery, name: &str) -> Option<f64> {
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

/// The kind named `name`; an unknown name reads as a failure.
fn kind_named(name: &str) -> DeadKind {
    name.parse().unwrap_or(DeadKind::Failed)
}

#[async_trait]
impl DeadLetters for Core {
    /// Publishes the body of `delivery`, byte for byte as it was delivered, to the
    /// `<queue>.quarantine` of its priority queue with the reason in its headers, waits for
    /// the broker's confirm, and only then acknowledges the delivery: a lost connection in
    /// between leaves the message to be delivered again (and maybe a dead letter too), never
    /// lost.
    ///
    /// # Errors
    /// A temporary [`Error::Connection`] when the delivery's connection is gone (the broker
    /// delivers the message again).
    async fn add(&self, delivery: &Delivery, reason: &DeadReason) -> Result<(), Error> {
        let receipt = RabbitReceipt::of(delivery)?;
        if !receipt.session.alive() {
            return Err(Error::connection(
                NAME,
                "the connection of this delivery is gone; the broker delivers it again",
            ));
        }
        let priority = delivery.priority();
        let home = self.queues.get(priority)?;
        let id = delivery.message().id();
        let session = &receipt.session;
        self.bury(session, (&home, priority), id, &receipt.body, reason)
            .await?;
        self.ack(delivery).await
    }

    /// Up to `limit` dead letters of `<queue>.quarantine`, oldest first, taken with
    /// `basic.get` and given back to their places unchanged (while listed, they are invisible
    /// to another listing or replay). Drops those past the retention's age on the way.
    async fn list(&self, priority: Priority, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        let store = quarantine_queue(&self.queues.get(priority)?);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let session = self.session().await?;
        let mut walk = DeadWalk::new(&session, store, priority);
        let listed = async {
            let mut letters = Vec::new();
            while let Some((stored, _)) = self.next_dead(&mut walk).await? {
                letters.push(stored.letter);
                if letters.len() >= limit {
                    break;
                }
            }
            Ok(letters)
        }
        .await;
        walk.finish(listed).await
    }

    /// Takes the dead letters of `<queue>.quarantine` one by one with `basic.get` (only those
    /// there when it begins); each one `replay` selects is published to its priority queue,
    /// due now, with the broker's confirm (an undecodable one as its exact bytes), then
    /// removed; the others go back to their places. A letter being replayed is invisible to
    /// another replay, so two at once do not put one back twice.
    async fn replay(&self, priority: Priority, replay: &Replay) -> Result<u64, Error> {
        let queue = self.queues.get(priority)?;
        let session = self.session().await?;
        let mut walk = DeadWalk::new(&session, quarantine_queue(&queue), priority);
        let properties = self.options.published_properties();
        let done = async {
            let mut replayed = 0;
            while let Some((stored, acker)) = self.next_dead(&mut walk).await? {
                if !replay.selects(&stored.letter) {
                    // Left unacknowledged: it goes back to its place when the walk finishes.
                    continue;
                }
                let body = match &stored.letter.message {
                    Some(message) => self.serializer.serialize(&replay.replayed(message))?,
                    None => stored.body,
                };
                let publish = async {
                    session.declare(&queue, FieldTable::default()).await?;
                    session.publish(&queue, &body, properties.clone()).await
                };
                session.bounded("replaying", publish).await?;
                // Removed once its copy is on the queue: a lost connection between the
                // two leaves it dead as well as replayed, never lost.
                walk.scratch.remove(&acker).await?;
                replayed += 1;
            }
            Ok(replayed)
        }
        .await;
        walk.finish(done).await
    }
}

impl Core {
    /// Reads a dead letter of the queue of `priority` from `delivery`, taken off its
    /// dead-letter queue.
    fn read_dead(&self, priority: Priority, delivery: AmqpDelivery) -> Stored {
        let decoded = self.serializer.deserialize(&delivery.data);
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

    /// The next dead letter of `walk`, not acknowledged, with the handle that removes it;
    /// those past the retention's age are removed on the way. `None` once the letters there
    /// when the walk began were all met, or the queue has no more.
    async fn next_dead(&self, walk: &mut DeadWalk<'_>) -> Result<Option<(Stored, Acker)>, Error> {
        let retention = self.options.retention;
        while walk.budget != Some(0) {
            let Some((delivery, left)) = walk.scratch.take(&walk.store).await? else {
                return Ok(None);
            };
            let budget = walk.budget.get_or_insert(left + 1);
            *budget -= 1;
            let acker = delivery.acker.clone();
            let stored = self.read_dead(walk.priority, delivery);
            if !stored.expired(&retention) {
                return Ok(Some((stored, acker)));
            }
            walk.scratch.remove(&acker).await?;
        }
        Ok(None)
    }

    /// Declares the dead-letter queue of `home` on `session` (once per session) and returns
    /// its name.
    async fn dead_store(&self, session: &Session, home: &str) -> Result<String, Error> {
        let store = quarantine_queue(home);
        if session.dead_stores.get(&store).is_some() {
            return Ok(store);
        }
        let count = self.options.retention.max_count;
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
            .declare(&store, self.options.durable, arguments)
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
        let properties = self.options.published_properties();
        let table = properties.headers().clone().unwrap_or_default();
        let properties = properties.with_headers(headers(id, priority, reason, table));
        let publish = session.publish(&store, body, properties);
        session.bounded("dead-lettering", publish).await?;
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
        let retention = self.options.retention;
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
