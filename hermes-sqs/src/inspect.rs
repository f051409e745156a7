//! Inspection and dead letters on SQS: SQS's approximate counts, and listing, replaying and
//! purging by receiving (SQS has no peek).

use std::time::Duration;

use hermes_core::inspect::{DeadLetter, Figure, QueueState, QueueStats, Replay};
use hermes_core::time::unix_now;
use hermes_core::{Error, Priority};

use crate::dead::{READING_VISIBILITY, Reading, StoredLetter};
use crate::driver::SqsDriver;
use crate::error::{COMMAND_TIMEOUT, bounded, sdk_error};
use crate::poll::Entry;
use crate::{MAX_BATCH_SIZE, NAME};

impl SqsDriver {
    /// How many messages this process holds for the queue called `name`, claimed ahead and not
    /// handed out.
    fn held_count(&self, name: &str) -> u64 {
        self.state().get(name).map_or(0, |queue| {
            queue
                .entries
                .iter()
                .filter(|e| matches!(e, Entry::Message(_)))
                .count() as u64
        })
    }

    /// All three approximate counts of the queue called `name` added up; 0 when it does not
    /// exist.
    async fn total(&self, name: &str) -> Result<u64, Error> {
        Ok(match self.existing(name).await? {
            Some(url) => self.counts(&url).await?.iter().sum(),
            None => 0,
        })
    }

    pub(crate) async fn stats_now(&self) -> Result<Vec<QueueStats>, Error> {
        let queues = self.inner.queues.all();
        // The delay queue and the dead-letter queue serve every priority queue; SQS counts
        // them as a whole, so only a driver with one queue can tell whose they are.
        let shared = queues.len() > 1;
        let share = |total: u64| {
            if shared && total > 0 {
                Figure::Unknown
            } else {
                Figure::Approximate(total)
            }
        };
        let long_delays = share(self.total(&self.inner.delay_queue).await?);
        let dead = share(self.total(&self.inner.quarantine).await?);
        let mut all = Vec::with_capacity(queues.len());
        for (priority, name) in queues {
            let [visible, hidden, delayed] = match self.existing(&name).await? {
                Some(url) => self.counts(&url).await?,
                None => [0; 3],
            };
            // Claimed ahead by this process but not handed out: waiting, from Hermes' view.
            let held = self.held_count(&name).min(hidden);
            let mut stats = QueueStats::unknown(name, priority);
            stats.waiting = Figure::Approximate(visible + held);
            stats.in_flight = Figure::Approximate(hidden - held);
            stats.delayed = match long_delays {
                Figure::Approximate(long) => Figure::Approximate(delayed + long),
                _ => Figure::Unknown,
            };
            stats.dead = dead;
            all.push(stats);
        }
        Ok(all)
    }

    /// The dead letter `stored` is, listed under `priority`.
    fn letter(&self, stored: &StoredLetter, priority: Priority) -> DeadLetter {
        let message = self
            .inner
            .serializer
            .deserialize(stored.body.as_bytes())
            .ok();
        DeadLetter::new(stored.message_id.clone(), priority, stored.reason.clone())
            .with_message(message)
    }

    pub(crate) async fn dead_letters_now(
        &self,
        priority: Priority,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, Error> {
        let name = self.inner.queues.get(priority)?;
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

    pub(crate) async fn replay_now(
        &self,
        priority: Priority,
        replay: &Replay,
    ) -> Result<u64, Error> {
        let name = self.inner.queues.get(priority)?;
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
                Ok(()) => self.delete(&store, &stored.handle).await,
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

    pub(crate) async fn purge_now(
        &self,
        priority: Priority,
        state: QueueState,
    ) -> Result<u64, Error> {
        let name = self.inner.queues.get(priority)?;
        match state {
            QueueState::Waiting => self.purge_waiting(&name).await,
            QueueState::Dead => self.purge_dead(priority, &name).await,
            _ => Err(Error::Unsupported {
                driver: NAME,
                what: "purging delayed or in-flight messages alone (SQS cannot receive them, \
                       and PurgeQueue empties a whole queue)",
            }),
        }
    }

    /// Deletes what this process holds of the queue called `name`, then receives and deletes
    /// until a receive (a long poll of 1 s) finds nothing, for at most as many receives as
    /// SQS counted visible messages at the start, by tens, and ten more. A message that
    /// arrived before it was due is sent on with its delay, as a `receive` does, not purged.
    async fn purge_waiting(&self, name: &str) -> Result<u64, Error> {
        let Some(url) = self.existing(name).await? else {
            return Ok(0);
        };
        let queue = self.resolve(name).await?;
        let held: Vec<String> = self
            .state()
            .get_mut(name)
            .map(|q| {
                q.entries
                    .drain(..)
                    .filter_map(|e| match e {
                        Entry::Message(held) => Some(held.handle),
                        Entry::Undecodable(_) => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut purged = held.len() as u64;
        self.delete_all(&queue, &held).await?;
        let [visible, _, _] = self.counts(&url).await?;
        let rounds = visible / MAX_BATCH_SIZE as u64 + 10;
        for _ in 0..rounds {
            let request = self
                .inner
                .client
                .receive_message()
                .queue_url(&queue.url)
                .max_number_of_messages(MAX_BATCH_SIZE)
                .wait_time_seconds(1)
                .visibility_timeout(READING_VISIBILITY.as_secs() as i32)
                .send();
            let received = bounded(
                "ReceiveMessage",
                Duration::from_secs(1) + COMMAND_TIMEOUT,
                request,
            )
            .await?
            .map_err(|e| sdk_error("ReceiveMessage", e))?;
            let messages = received.messages.unwrap_or_default();
            if messages.is_empty() {
                break;
            }
            let mut handles = Vec::new();
            for message in messages {
                let (Some(body), Some(handle)) = (message.body, message.receipt_handle) else {
                    continue;
                };
                let due_later = self
                    .inner
                    .serializer
                    .deserialize(body.as_bytes())
                    .ok()
                    .and_then(|m| m.execute_at())
                    .filter(|at| *at > unix_now());
                if let Some(at) = due_later {
                    self.route(&queue, body, Some(at)).await?;
                    self.delete(&queue, &handle).await?;
                } else {
                    handles.push(handle);
                }
            }
            purged += handles.len() as u64;
            self.delete_all(&queue, &handles).await?;
        }
        if purged > 0 {
            tracing::info!(queue = %name, "Purged {purged} waiting messages");
        }
        Ok(purged)
    }

    /// Deletes the dead letters of the queue called `name`, of `priority`.
    async fn purge_dead(&self, priority: Priority, name: &str) -> Result<u64, Error> {
        let Some(reading) = self.read_store().await? else {
            return Ok(0);
        };
        let Reading { store, letters } = reading;
        let (mine, others): (Vec<_>, Vec<_>) = letters
            .into_iter()
            .partition(|l| l.belongs_to(priority, name));
        let handles: Vec<String> = mine.into_iter().map(|l| l.handle).collect();
        let deleted = self.delete_all(&store, &handles).await;
        self.release(Reading {
            store,
            letters: others,
        })
        .await;
        deleted?;
        Ok(handles.len() as u64)
    }
}
