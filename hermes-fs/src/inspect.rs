//! Inspection on the folders: counts read off the file names (`new/` split at the current time
//! into waiting and delayed, `processing/`, `failed/`), peeks that read files without moving
//! them, purges and deletes.

use std::path::Path;
use std::time::Duration;

use hermes_core::driver::{Browse, Inspect, async_trait};
use hermes_core::inspect::{Figure, QueueState, QueueStats};
use hermes_core::time::unix_now;
use hermes_core::{Error, Message, Priority};

use crate::core::Core;
use crate::dead_letters::{failed_names, remove_failed};
use crate::files::{names, read_regular_file, remove};
use crate::naming;

#[async_trait]
impl Inspect for Core {
    async fn stats(&self) -> Result<Vec<QueueStats>, Error> {
        let now = unix_now();
        self.queues
            .all()
            .into_iter()
            .map(|(priority, queue)| {
                let dues: Vec<f64> = names(&queue.new)?
                    .iter()
                    .filter_map(|n| naming::due_of(n))
                    .collect();
                let waiting: Vec<f64> = dues.iter().copied().filter(|d| *d <= now).collect();
                let in_flight = names(&queue.processing)?
                    .iter()
                    .filter(|n| naming::parse_claimed(n).is_some())
                    .count();
                let dead = failed_names(&queue.failed)?.len();
                let oldest = waiting.iter().copied().reduce(f64::min);
                let mut stats = QueueStats::unknown(queue.name.clone(), priority);
                stats.waiting = Figure::Exact(waiting.len() as u64);
                stats.delayed = Figure::Exact((dues.len() - waiting.len()) as u64);
                stats.in_flight = Figure::Exact(in_flight as u64);
                stats.dead = Figure::Exact(dead as u64);
                stats.latency = Figure::Exact(oldest.map_or(Duration::ZERO, |due| {
                    Duration::from_secs_f64((now - due).max(0.0))
                }));
                Ok(stats)
            })
            .collect()
    }

    async fn purge(&self, priority: Priority, state: QueueState) -> Result<Option<u64>, Error> {
        let queue = self.queues.get(priority)?;
        let now = unix_now();
        let mut purged = 0;
        match state {
            QueueState::Waiting | QueueState::Delayed => {
                for name in names(&queue.new)? {
                    let Some(due) = naming::due_of(&name) else {
                        continue;
                    };
                    if (due <= now) == (state == QueueState::Waiting)
                        && remove(&queue.new.join(&name))?
                    {
                        queue.removed(&name);
                        purged += 1;
                    }
                }
            }
            QueueState::InFlight => {
                for name in names(&queue.processing)? {
                    if naming::parse_claimed(&name).is_some()
                        && remove(&queue.processing.join(&name))?
                    {
                        purged += 1;
                    }
                }
            }
            QueueState::Dead => {
                for name in failed_names(&queue.failed)? {
                    remove_failed(&queue.failed, &name)?;
                    purged += 1;
                }
            }
            _ => {
                return Err(Error::Unsupported {
                    driver: crate::NAME,
                    what: "this queue state",
                });
            }
        }
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
        let now = unix_now();
        let mut files: Vec<(f64, String)> = match state {
            QueueState::Waiting | QueueState::Delayed => names(&queue.new)?
                .into_iter()
                .filter_map(|n| naming::due_of(&n).map(|due| (due, n)))
                .filter(|(due, _)| (*due <= now) == (state == QueueState::Waiting))
                .collect(),
            QueueState::InFlight => names(&queue.processing)?
                .into_iter()
                .filter_map(|n| naming::parse_claimed(&n).map(|(claim, _)| (claim, n.clone())))
                .collect(),
            QueueState::Dead => {
                return Ok(self
                    .dead_in(&queue, priority, usize::MAX)?
                    .into_iter()
                    .filter_map(|letter| letter.message)
                    .take(limit)
                    .collect());
            }
            _ => {
                return Err(Error::Unsupported {
                    driver: crate::NAME,
                    what: "this queue state",
                });
            }
        };
        let folder = match state {
            QueueState::InFlight => &queue.processing,
            _ => &queue.new,
        };
        files.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        Ok(files
            .iter()
            .filter_map(|(_, name)| read_regular_file(&folder.join(name)).ok().flatten())
            .filter_map(|body| self.serializer.deserialize(&body).ok())
            .take(limit)
            .collect())
    }

    async fn delete(&self, priority: Priority, id: &str) -> Result<bool, Error> {
        let queue = self.queues.get(priority)?;
        let is_it = |path: &Path| {
            read_regular_file(path)
                .ok()
                .flatten()
                .and_then(|body| self.serializer.deserialize(&body).ok())
                .is_some_and(|m| m.id() == id)
        };
        for name in names(&queue.new)? {
            if naming::due_of(&name).is_some()
                && is_it(&queue.new.join(&name))
                && remove(&queue.new.join(&name))?
            {
                queue.removed(&name);
                return Ok(true);
            }
        }
        for name in failed_names(&queue.failed)? {
            if name == id || is_it(&queue.failed.join(&name)) {
                remove_failed(&queue.failed, &name)?;
                return Ok(true);
            }
        }
        Ok(false)
    }
}
