//! Sending a message on its way: straight into its queue when it is due, else down the queue's
//! delay ladder (see the `ladder` module), declared on a session the first time it is used.

use hermes_core::Error;
use hermes_core::time::unix_now;
use lapin::types::{AMQPValue, FieldTable};

use crate::QueueType;
use crate::amqp::{Published, Session, again_while_refused};
use crate::core::Core;
use crate::ladder::{self, Trip};
use crate::naming::{arrival_exchange, delay_level, long_delay_queue};

impl Core {
    /// Puts `body`, due at `due`, on its way to `target`: into the target when due, else into
    /// the target's delay ladder, which lets it into the target when due (see [`delay_level`]);
    /// published again while the broker refuses it (see [`again_while_refused`]).
    pub(crate) async fn route(
        &self,
        session: &Session,
        target: &str,
        body: &[u8],
        due: Option<f64>,
    ) -> Result<(), Error> {
        again_while_refused(|| self.start_route(session, target, body, due)).await
    }

    /// [`route`](Core::route) without waiting for the broker's confirm, which the
    /// returned [`Published`] waits for.
    pub(crate) async fn start_route(
        &self,
        session: &Session,
        target: &str,
        body: &[u8],
        due: Option<f64>,
    ) -> Result<Published, Error> {
        // The target must exist, also for a delayed message to land when dead-lettered.
        session.declare(target, FieldTable::default()).await?;
        let properties = self.options.published_properties();
        let remaining_ms = due.map_or(0.0, |at| (at - unix_now()) * 1000.0);
        if remaining_ms <= 0.0 {
            return session.start_publish("", target, body, properties).await;
        }
        let trip = Trip::for_delay(remaining_ms);
        let entry = trip.entry_level();
        declare_ladder(session, target, entry).await?;
        session
            .start_publish(
                &delay_level(target, entry),
                &trip.routing_key(),
                body,
                properties,
            )
            .await
    }
}

/// Declares levels `0..=top` of the delay ladder of `target`, lowest first (a level binds
/// to the one below it), once per session; before level 0, where the ladder ends.
async fn declare_ladder(session: &Session, target: &str, top: usize) -> Result<(), Error> {
    let done = session.ladders.declared(target);
    if done == 0 {
        declare_arrival(session, target).await?;
    }
    for level in done..=top {
        declare_level(session, target, level).await?;
        session.ladders.note(target, level);
    }
    Ok(())
}

/// Declares where `target`'s ladder ends: the arrival exchange, bound to the target queue
/// and to the long-delay queue.
async fn declare_arrival(session: &Session, target: &str) -> Result<(), Error> {
    let arrival = arrival_exchange(target);
    session.declare_exchange(&arrival).await?;
    let long = long_delay_queue(target);
    session.declare(&long, FieldTable::default()).await?;
    for (key, to_long) in ladder::arrival_keys() {
        let queue = if to_long { long.as_str() } else { target };
        session.bind_queue(queue, &arrival, key).await?;
    }
    Ok(())
}

/// Declares the exchange and the queue of one level of `target`'s ladder and their
/// bindings: a one in the level's word to its queue, a zero on to the level below (from
/// level 0: to the arrival exchange), where the queue also dead-letters to.
async fn declare_level(session: &Session, target: &str, level: usize) -> Result<(), Error> {
    let name = delay_level(target, level);
    session.declare_exchange(&name).await?;
    let below = if level == 0 {
        arrival_exchange(target)
    } else {
        delay_level(target, level - 1)
    };
    let mut arguments = FieldTable::default();
    let ttl = i64::try_from(ladder::level_ttl_ms(level)).unwrap_or(i64::MAX);
    arguments.insert("x-message-ttl".into(), AMQPValue::LongLongInt(ttl));
    arguments.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString(below.as_str().into()),
    );
    if session.queue_type() == QueueType::Quorum {
        // A quorum queue can dead-letter at least once, which needs it to refuse
        // publishes rather than drop its oldest when it is full (it never is: no limit).
        arguments.insert(
            "x-dead-letter-strategy".into(),
            AMQPValue::LongString("at-least-once".into()),
        );
        arguments.insert(
            "x-overflow".into(),
            AMQPValue::LongString("reject-publish".into()),
        );
    }
    session.declare(&name, arguments).await?;
    session
        .bind_queue(&name, &name, &ladder::binding_key(level, true))
        .await?;
    session
        .bind_exchange(&below, &name, &ladder::binding_key(level, false))
        .await
}
