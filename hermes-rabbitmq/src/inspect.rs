//! Inspection over AMQP: counts from passive declarations, purges, and the dead letters of a
//! priority queue (its `<queue>.quarantine`) listed and replayed with `basic.get`, giving
//! back what is not removed.
//!
//! What AMQP tells a client, and so what each figure is:
//! - waiting: the ready messages of the priority queue, exact;
//! - delayed: the ready messages of the queue's delay ladder (`<queue>.delay.level<n>`, its
//!   levels exist from 0 up, so the count stops at the first missing one), of its long-delay
//!   queue and of the delay queues of earlier versions, approximate: a message passing from
//!   one level to the next is in neither for a moment;
//! - in flight: unknown (the broker does not tell a client how many messages other consumers
//!   hold);
//! - dead: the ready messages of the dead-letter queue, exact (letters a listing or a replay
//!   holds at that moment are not counted);
//! - latency: unknown (AMQP does not give a queue's oldest message without taking it).

use hermes_core::inspect::{DeadLetter, Figure, QueueState, QueueStats, Replay};
use hermes_core::{Error, Priority};
use lapin::types::FieldTable;

use crate::NAME;
use crate::driver::RabbitMqDriver;
use crate::ladder::DELAY_LEVELS;
use crate::naming::{
    LEGACY_DELAY_LEVELS_MS, delay_level, legacy_delay_queue, long_delay_queue, quarantine_queue,
};
use crate::scratch::Scratch;
use crate::session::bounded;

impl RabbitMqDriver {
    pub(crate) async fn stats_now(&self) -> Result<Vec<QueueStats>, Error> {
        let session = self.session().await?;
        let mut scratch = Scratch::new(&session);
        let mut all = Vec::new();
        let counted = async {
            for (priority, queue) in self.inner.queues.all() {
                let (waiting, consumers) = scratch.counts(&queue).await?.unwrap_or((0, 0));
                let delayed: u64 = delay_queues(&mut scratch, &queue)
                    .await?
                    .iter()
                    .map(|(_, n)| u64::from(*n))
                    .sum();
                let dead = scratch.ready(&quarantine_queue(&queue)).await?.unwrap_or(0);
                let mut stats = QueueStats::unknown(queue, priority);
                stats.waiting = Figure::Exact(u64::from(waiting));
                stats.delayed = Figure::Approximate(delayed);
                stats.dead = Figure::Exact(u64::from(dead));
                stats.consumers = Figure::Exact(u64::from(consumers));
                all.push(stats);
            }
            Ok::<_, Error>(())
        }
        .await;
        let finished = scratch.finish().await;
        counted?;
        finished?;
        Ok(all)
    }

    pub(crate) async fn dead_letters_now(
        &self,
        priority: Priority,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, Error> {
        let store = quarantine_queue(&self.inner.queues.get(priority)?);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let session = self.session().await?;
        let mut scratch = Scratch::new(&session);
        let retention = self.inner.options.retention;
        let mut letters = Vec::new();
        let listed = async {
            // The letters there when the listing began, no more: one added meanwhile is not
            // met again.
            let mut budget = None;
            while let Some((delivery, left)) = scratch.take(&store).await? {
                let budget = budget.get_or_insert(left + 1);
                *budget -= 1;
                let acker = delivery.acker.clone();
                let stored = self.read_dead(priority, delivery);
                if stored.expired(&retention) {
                    scratch.remove(&acker).await?;
                } else {
                    letters.push(stored.letter);
                }
                if letters.len() >= limit || *budget == 0 {
                    break;
                }
            }
            Ok::<_, Error>(())
        }
        .await;
        let finished = scratch.finish().await;
        listed?;
        finished?;
        Ok(letters)
    }

    pub(crate) async fn replay_now(
        &self,
        priority: Priority,
        replay: &Replay,
    ) -> Result<u64, Error> {
        let queue = self.inner.queues.get(priority)?;
        let store = quarantine_queue(&queue);
        let session = self.session().await?;
        let mut scratch = Scratch::new(&session);
        let retention = self.inner.options.retention;
        let properties = self.inner.options.published_properties();
        let mut replayed = 0;
        let done = async {
            let mut budget = None;
            while let Some((delivery, left)) = scratch.take(&store).await? {
                let budget = budget.get_or_insert(left + 1);
                *budget -= 1;
                let acker = delivery.acker.clone();
                let stored = self.read_dead(priority, delivery);
                if stored.expired(&retention) {
                    scratch.remove(&acker).await?;
                } else if replay.selects(&stored.letter) {
                    let body = match &stored.letter.message {
                        Some(message) => {
                            self.inner.serializer.serialize(&replay.replayed(message))?
                        }
                        None => stored.body,
                    };
                    let publish = async {
                        session.declare(&queue, FieldTable::default()).await?;
                        session.publish(&queue, &body, properties.clone()).await
                    };
                    bounded("replaying", Some(&session), publish).await?;
                    // Removed once its copy is on the queue: a lost connection between the
                    // two leaves it dead as well as replayed, never lost.
                    scratch.remove(&acker).await?;
                    replayed += 1;
                }
                // Left unacknowledged: it goes back to its place when the scratch finishes.
                if *budget == 0 {
                    break;
                }
            }
            Ok::<_, Error>(())
        }
        .await;
        let finished = scratch.finish().await;
        done?;
        finished?;
        Ok(replayed)
    }

    pub(crate) async fn purge_now(
        &self,
        priority: Priority,
        state: QueueState,
    ) -> Result<Option<u64>, Error> {
        let queue = self.inner.queues.get(priority)?;
        if !matches!(
            state,
            QueueState::Waiting | QueueState::Delayed | QueueState::Dead
        ) {
            return Err(Error::Unsupported {
                driver: NAME,
                what: "purging in-flight messages (the broker lets no client take messages \
                       another consumer holds)",
            });
        }
        let session = self.session().await?;
        let mut scratch = Scratch::new(&session);
        let purged = async {
            let names = match state {
                QueueState::Waiting => vec![queue.clone()],
                QueueState::Dead => vec![quarantine_queue(&queue)],
                _ => delay_queues(&mut scratch, &queue)
                    .await?
                    .into_iter()
                    .map(|(name, _)| name)
                    .collect(),
            };
            let mut purged = 0;
            for name in names {
                purged += u64::from(scratch.purge(&name).await?.unwrap_or(0));
            }
            Ok::<_, Error>(purged)
        }
        .await;
        let finished = scratch.finish().await;
        let purged = purged?;
        finished?;
        Ok(Some(purged))
    }
}

/// The delay queues of `queue` that exist, with their ready counts: the levels of its ladder
/// (from 0 up to the first missing one: a ladder is always declared from level 0 up), its
/// long-delay queue and the delay queues of earlier versions.
async fn delay_queues(scratch: &mut Scratch<'_>, queue: &str) -> Result<Vec<(String, u32)>, Error> {
    let mut found = Vec::new();
    for level in 0..DELAY_LEVELS {
        let name = delay_level(queue, level);
        match scratch.ready(&name).await? {
            Some(count) => found.push((name, count)),
            None => break,
        }
    }
    let others = std::iter::once(long_delay_queue(queue)).chain(
        LEGACY_DELAY_LEVELS_MS
            .iter()
            .map(|ms| legacy_delay_queue(queue, *ms)),
    );
    for name in others {
        if let Some(count) = scratch.ready(&name).await? {
            found.push((name, count));
        }
    }
    Ok(found)
}
