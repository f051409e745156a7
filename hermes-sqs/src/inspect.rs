//! Inspection on SQS: SQS's approximate counts, and purging by receiving (SQS has no peek).

use std::time::Duration;

use hermes_core::driver::{Inspect, async_trait};
use hermes_core::inspect::{Figure, QueueState, QueueStats};
use hermes_core::time::unix_now;
use hermes_core::{Error, Priority};

use crate::api::{SQS_CALL_TIMEOUT, counts, delete, delete_all, sdk_call};
use crate::core::{Core, Entry};
use crate::dead_letters::{READING_VISIBILITY, Reading};
use crate::error::sdk_error;
use crate::{MAX_BATCH_SIZE, NAME};

#[async_trait]
impl Inspect for Core {
    /// SQS's approximate counts; see [`SqsDriver`](crate::SqsDriver) for what each figure is.
    async fn stats(&self) -> Result<Vec<QueueStats>, Error> {
        let queues = self.queues.all();
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
        let long_delays = share(self.total(&self.delay_queue).await?);
        let dead = share(self.total(&self.quarantine).await?);
        let mut all = Vec::with_capacity(queues.len());
        for (priority, name) in queues {
            let [visible, hidden, delayed] = match self.existing(&name).await? {
                Some(url) => counts(&self.client, &url).await?,
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

    /// Purges [`QueueState::Waiting`] and [`QueueState::Dead`]; the others are
    /// [`Error::Unsupported`]. Returns how many were deleted.
    async fn purge(&self, priority: Priority, state: QueueState) -> Result<Option<u64>, Error> {
        let name = self.queues.get(priority)?;
        let purged = match state {
            QueueState::Waiting => self.purge_waiting(&name).await?,
            QueueState::Dead => self.purge_dead(priority, &name).await?,
            _ => {
                return Err(Error::Unsupported {
                    driver: NAME,
                    what: "purging delayed or in-flight messages alone (SQS cannot receive \
                           them, and PurgeQueue empties a whole queue)",
                });
            }
        };
        Ok(Some(purged))
    }
}

impl Core {
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
            Some(url) => counts(&self.client, &url).await?.iter().sum(),
            None => 0,
        })
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
        delete_all(&self.client, &queue, &held).await?;
        let [visible, _, _] = counts(&self.client, &url).await?;
        let rounds = visible / MAX_BATCH_SIZE as u64 + 10;
        for _ in 0..rounds {
            let request = self
                .client
                .receive_message()
                .queue_url(&queue.url)
                .max_number_of_messages(MAX_BATCH_SIZE)
                .wait_time_seconds(1)
                .visibility_timeout(READING_VISIBILITY.as_secs() as i32)
                .send();
            let received = sdk_call(
                "ReceiveMessage",
                Duration::from_secs(1) + SQS_CALL_TIMEOUT,
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
                    .serializer
                    .deserialize(body.as_bytes())
                    .ok()
                    .and_then(|m| m.execute_at())
                    .filter(|at| *at > unix_now());
                if let Some(at) = due_later {
                    self.route(&queue, body, Some(at)).await?;
                    delete(&self.client, &queue, &handle).await?;
                } else {
                    handles.push(handle);
                }
            }
            purged += handles.len() as u64;
            delete_all(&self.client, &queue, &handles).await?;
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
        let deleted = delete_all(&self.client, &store, &handles).await;
        self.release(Reading {
            store,
            letters: others,
        })
        .await;
        deleted?;
        Ok(handles.len() as u64)
    }
}
