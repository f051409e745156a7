//! Inspection on the table: exact counts per state read off the indexes, purges, peeks that
//! claim nothing, and deletes by message id.

use std::time::Duration;

use hermes_core::driver::{Browse, Inspect, async_trait};
use hermes_core::inspect::{Figure, Page, PageRequest, QueueState, QueueStats};
use hermes_core::{Error, Message, Priority};

use crate::core::{Core, Held};

/// The prefix of the id of a dead letter that could not be decoded (its row's id follows).
pub(crate) const UNDECODABLE_ID: &str = "undecodable-";

/// The index of `state` in the statements written per state; `None` for dead letters.
///
/// # Errors
/// [`Error::Unsupported`] for a state this driver does not know.
fn state_index(state: QueueState) -> Result<Option<usize>, Error> {
    match state {
        QueueState::Waiting => Ok(Some(0)),
        QueueState::Delayed => Ok(Some(1)),
        QueueState::InFlight => Ok(Some(2)),
        QueueState::Dead => Ok(None),
        _ => Err(Error::Unsupported {
            driver: crate::NAME,
            what: "a queue state it does not know",
        }),
    }
}

/// A count from the server as a figure.
fn exact(count: i64) -> Figure<u64> {
    Figure::Exact(u64::try_from(count).unwrap_or(0))
}

#[async_trait]
impl Inspect for Core {
    /// One statement per queue, every count exact. Rows this process claimed ahead and no
    /// handler has yet are given back first (they count as waiting, not in flight), and the
    /// rows it acknowledged are deleted.
    async fn stats(&self) -> Result<Vec<QueueStats>, Error> {
        self.settle_before_reading(None).await?;
        let mut all = Vec::new();
        for (priority, queue) in self.queues.all() {
            let name = queue.as_str();
            let row = self
                .on_connection("reading the figures", |client| async move {
                    let statement = client.prepare_cached(&self.sql.stats).await?;
                    client.query_one(&statement, &[&name]).await
                })
                .await?;
            let mut stats = QueueStats::unknown(queue, priority);
            stats.waiting = exact(row.get(0));
            stats.delayed = exact(row.get(1));
            stats.in_flight = exact(row.get(2));
            stats.dead = exact(row.get(3));
            let latency: Option<f64> = row.get(4);
            stats.latency = Figure::Exact(
                Duration::try_from_secs_f64(latency.unwrap_or(0.0).max(0.0)).unwrap_or_default(),
            );
            all.push(stats);
        }
        Ok(all)
    }

    async fn purge(&self, priority: Priority, state: QueueState) -> Result<Option<u64>, Error> {
        let queue = self.queues.get(priority)?;
        let index = state_index(state)?;
        self.settle_before_reading(Some(priority)).await?;
        let sql = match index {
            Some(i) => &self.sql.purge[i],
            None => &self.sql.purge_dead,
        };
        let purged = self
            .on_connection("a purge", |client| async move {
                let statement = client.prepare_cached(sql).await?;
                client.execute(&statement, &[&queue]).await
            })
            .await?;
        Ok(Some(purged))
    }
}

#[async_trait]
impl Browse for Core {
    async fn peek(
        &self,
        priority: Priority,
        state: QueueState,
        limit: usize,
    ) -> Result<Vec<Message>, Error> {
        let queue = self.queues.get(priority)?;
        let index = state_index(state)?;
        self.settle_before_reading(Some(priority)).await?;
        let sql = match index {
            Some(i) => &self.sql.peek[i],
            None => &self.sql.peek_dead,
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .on_connection("a peek", |client| async move {
                let statement = client.prepare_cached(sql).await?;
                client.query(&statement, &[&queue, &limit]).await
            })
            .await?;
        Ok(rows
            .iter()
            .filter_map(|row| self.serializer.deserialize(row.get(0)).ok())
            .collect())
    }

    async fn page(&self, priority: Priority, request: &PageRequest) -> Result<Page, Error> {
        self.read_page(priority, request).await
    }

    /// Removes the waiting or delayed row of message `id`, and its dead letter.
    async fn delete(&self, priority: Priority, id: &str) -> Result<bool, Error> {
        let queue = self.queues.get(priority)?;
        self.settle_before_reading(Some(priority)).await?;
        let row_id: i64 = id
            .strip_prefix(UNDECODABLE_ID)
            .and_then(|n| n.parse().ok())
            .unwrap_or(-1);
        let row = self
            .on_connection("a delete", |client| async move {
                let statement = client.prepare_cached(&self.sql.delete).await?;
                client.query_one(&statement, &[&queue, &id, &row_id]).await
            })
            .await?;
        Ok(row.get::<_, i64>(0) > 0)
    }
}

impl Core {
    /// Gives back the rows of the queue of `priority` (`None`: of every queue) this process
    /// claimed ahead and no handler has yet, and deletes the rows it acknowledged, so that the
    /// table tells where every message is. Runs in a task of its own: a dropped call leaves
    /// nothing held.
    pub(crate) async fn settle_before_reading(
        &self,
        priority: Option<Priority>,
    ) -> Result<(), Error> {
        let mut held = Vec::new();
        {
            let mut buffer = self.buffer();
            let all: Vec<Held> = buffer.drain(..).collect();
            for h in all {
                if priority.is_none_or(|p| p == h.priority) {
                    held.push(h);
                } else {
                    buffer.push_back(h);
                }
            }
        }
        let acked = self.take_acked();
        if held.is_empty() && acked.is_empty() {
            return Ok(());
        }
        let Some(core) = self.this.upgrade() else {
            return Ok(());
        };
        hermes_core::driver::task::detached(async move {
            let given_back = core.give_back(&held).await;
            let removed = core.remove(&acked).await;
            if removed.is_err() {
                core.defer_acks(acked);
            }
            given_back.and(removed)
        })
        .await
    }
}
