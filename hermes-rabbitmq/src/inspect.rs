//! Inspection over AMQP: counts from passive declarations, and purges. (The dead letters of a
//! priority queue, its `<queue>.quarantine`, are listed and replayed in `dead_letters`.)
//!
//! What AMQP tells a client, and so what each figure is:
//! - waiting: the ready messages of the priority queue, approximate: the messages the broker
//!   sent ahead to a consumer (its prefetch) are no longer ready, though no `receive` took
//!   them yet;
//! - delayed: the ready messages of the queue's delay ladder (`<queue>.delay.level<n>`, its
//!   levels exist from 0 up, so the count stops at the first missing one), of its long-delay
//!   queue and of the delay queues of earlier versions, approximate: a message passing from
//!   one level to the next is in neither for a moment;
//! - in flight: unknown (the broker does not tell a client how many messages other consumers
//!   hold);
//! - dead: the ready messages of the dead-letter queue, exact (letters a listing or a replay
//!   holds at that moment are not counted);
//! - latency: unknown (AMQP does not give a queue's oldest message without taking it).

use hermes_core::driver::{Inspect, async_trait};
use hermes_core::inspect::{Figure, QueueState, QueueStats};
use hermes_core::{Error, Priority};

use crate::NAME;
use crate::amqp::Scratch;
use crate::core::Core;
use crate::ladder::DELAY_LEVELS;
use crate::naming::{
    LEGACY_DELAY_LEVELS_MS, delay_level, legacy_delay_queue, long_delay_queue, quarantine_queue,
};

#[async_trait]
impl Inspect for Core {
    /// Per priority queue: waiting approximate (its ready messages: those sent ahead to a
    /// consumer are not), delayed approximate (the ready messages of its delay queues: one
    /// passing between two of them is missed for a moment),
    /// dead exact (the ready messages of its `<queue>.quarantine`), in flight and latency
    /// unknown (AMQP does not tell them). A queue not declared yet counts 0; nothing is
    /// declared.
    async fn stats(&self) -> Result<Vec<QueueStats>, Error> {
        let session = self.session().await?;
        let mut scratch = Scratch::new(&session);
        let mut all = Vec::new();
        let counted = async {
            for (priority, queue) in self.queues.all() {
                let (waiting, consumers) = scratch.counts(&queue).await?.unwrap_or((0, 0));
                let delayed: u64 = delay_queues(&mut scratch, &queue)
                    .await?
                    .iter()
                    .map(|(_, n)| u64::from(*n))
                    .sum();
                let dead = scratch.ready(&quarantine_queue(&queue)).await?.unwrap_or(0);
                let mut stats = QueueStats::unknown(queue, priority);
                stats.waiting = Figure::Approximate(u64::from(waiting));
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

    /// Waiting: `queue.purge` of the priority queue (messages a worker holds, its prefetch
    /// included, are in flight and stay). Delayed: `queue.purge` of each of its delay queues.
    /// Dead: `queue.purge` of its `<queue>.quarantine`. Returns how many went.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for [`QueueState::InFlight`].
    async fn purge(&self, priority: Priority, state: QueueState) -> Result<Option<u64>, Error> {
        let queue = self.queues.get(priority)?;
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
