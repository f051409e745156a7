//! Inspection on the folders: counts read off the file names (`new/` split at the current time
//! into waiting and delayed, `processing/`, `failed/`), peeks that read files without moving
//! them, purges and deletes.

use std::path::Path;
use std::time::Duration;

use hermes_core::driver::{Browse, Inspect, async_trait};
use hermes_core::inspect::{
    FILTER_READS, Figure, Page, PageRequest, QueueState, QueueStats, peeked_page,
};
use hermes_core::time::unix_now;
use hermes_core::{Error, Message, Priority};

use crate::core::Core;
use crate::dead_letters::{failed_names, remove_failed};
use crate::files::{QueueDir, names, read_regular_file, remove};
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
        if state == QueueState::Dead {
            return Ok(self
                .dead_in(&queue, priority, usize::MAX)?
                .into_iter()
                .filter_map(|letter| letter.message)
                .take(limit)
                .collect());
        }
        let (folder, files) = ordered_files(&queue, state)?;
        Ok(files
            .iter()
            .filter_map(|(_, name)| read_regular_file(&folder.join(name)).ok().flatten())
            .filter_map(|body| self.serializer.deserialize(&body).ok())
            .take(limit)
            .collect())
    }

    /// Lists the state's folder and reads only the page's files; the cursor is the name of
    /// the last file the page before looked at.
    async fn page(&self, priority: Priority, request: &PageRequest) -> Result<Page, Error> {
        if request.state == QueueState::Dead {
            return peeked_page(self, priority, request).await;
        }
        let queue = self.queues.get(priority)?;
        let (folder, files) = ordered_files(&queue, request.state)?;
        let start = match request.cursor.as_deref() {
            None => 0,
            Some(name) => {
                let key = sort_key(request.state, name).ok_or(Error::InvalidCursor)?;
                files.partition_point(|(due, n)| {
                    due.total_cmp(&key)
                        .then_with(|| n.as_str().cmp(name))
                        .is_le()
                })
            }
        };
        let budget = FILTER_READS.max(request.limit);
        let mut messages = Vec::new();
        let mut last = None;
        for (looked, (_, name)) in files[start..].iter().enumerate() {
            if messages.len() == request.limit || looked == budget {
                break;
            }
            last = Some(name);
            if let Some(message) = read_regular_file(&folder.join(name))
                .ok()
                .flatten()
                .and_then(|body| self.serializer.deserialize(&body).ok())
                && request.selects(&message)
            {
                messages.push(message);
            }
        }
        let at_end = last.is_none_or(|last| files.last().is_some_and(|(_, n)| n == last));
        let next = if at_end { None } else { last.cloned() };
        Ok(Page::new(messages, next))
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

/// How a file of `state` sorts: by due time (waiting, delayed) or claim time (in flight), then
/// by name; `None` for a name that is not one of the state's.
fn sort_key(state: QueueState, name: &str) -> Option<f64> {
    match state {
        QueueState::InFlight => naming::parse_claimed(name).map(|(claim, _)| claim),
        _ => naming::due_of(name),
    }
}

/// A folder and the names of its files with their sort keys, in order.
type Ordered<'a> = (&'a Path, Vec<(f64, String)>);

/// The folder holding the messages of `state` (waiting, delayed or in flight) and their file
/// names with their sort keys, in order: due time (claim time in flight), then name.
fn ordered_files(queue: &QueueDir, state: QueueState) -> Result<Ordered<'_>, Error> {
    let now = unix_now();
    let (folder, mut files): (&Path, Vec<(f64, String)>) = match state {
        QueueState::Waiting | QueueState::Delayed => (
            &queue.new,
            names(&queue.new)?
                .into_iter()
                .filter_map(|n| naming::due_of(&n).map(|due| (due, n)))
                .filter(|(due, _)| (*due <= now) == (state == QueueState::Waiting))
                .collect(),
        ),
        QueueState::InFlight => (
            &queue.processing,
            names(&queue.processing)?
                .into_iter()
                .filter_map(|n| sort_key(state, &n).map(|claim| (claim, n)))
                .collect(),
        ),
        _ => {
            return Err(Error::Unsupported {
                driver: crate::NAME,
                what: "this queue state",
            });
        }
    };
    files.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    Ok((folder, files))
}
