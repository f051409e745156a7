//! Inspection and dead letters on the folders: counts read off the file names, peeks that read
//! files without moving them, and dead letters in `failed/`.
//!
//! A dead letter is its message file in `failed/`, under its name in `new/`, where Hermes also
//! puts the files it cannot decode, beside a `<name>.reason` file holding the reason as JSON.
//! PHP Hermes never reads `failed/`, so the reason files disturb nothing; a file there without
//! one (PHP put it there) is an undecodable dead letter without a recorded reason.

use std::fs;
use std::io;
use std::path::Path;
use std::time::Duration;

use hermes_core::time::unix_now;
use hermes_core::{
    DeadKind, DeadLetter, DeadReason, Error, Figure, Message, Priority, QueueState, QueueStats,
    Replay, Retention,
};

use crate::FileSystemDriver;
use crate::error::io_error;
use crate::naming;
use crate::queue::{QueueDir, read_regular_file};

/// One file of `failed/`, with its reason.
struct FailedFile {
    name: String,
    reason: DeadReason,
}

impl FileSystemDriver {
    pub(crate) fn stats_now(&self) -> Result<Vec<QueueStats>, Error> {
        let now = unix_now();
        self.inner
            .queues
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

    pub(crate) fn peek_now(
        &self,
        priority: Priority,
        state: QueueState,
        limit: usize,
    ) -> Result<Vec<Message>, Error> {
        let queue = self.inner.queues.get(priority)?;
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
                    .dead_now(&queue, priority, usize::MAX)?
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
            .filter_map(|body| self.inner.serializer.deserialize(&body).ok())
            .take(limit)
            .collect())
    }

    pub(crate) fn dead_letters_now(
        &self,
        priority: Priority,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, Error> {
        let queue = self.inner.queues.get(priority)?;
        self.dead_now(&queue, priority, limit)
    }

    fn dead_now(
        &self,
        queue: &QueueDir,
        priority: Priority,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, Error> {
        Ok(failed_files(&queue.failed)?
            .into_iter()
            .take(limit)
            .map(|file| {
                let message = read_regular_file(&queue.failed.join(&file.name))
                    .ok()
                    .flatten()
                    .and_then(|body| self.inner.serializer.deserialize(&body).ok());
                DeadLetter::new(file.name, priority, file.reason).with_message(message)
            })
            .collect())
    }

    /// Moves the claimed file `claimed` (named `file` in `new/`) to `failed/` with `reason`,
    /// then applies the retention. A claim that is gone (it expired, and the file was given
    /// back) is left alone.
    pub(crate) fn bury(
        &self,
        queue: &QueueDir,
        claimed: &str,
        file: &str,
        reason: &DeadReason,
    ) -> Result<(), Error> {
        let from = queue.processing.join(claimed);
        let to = queue.failed.join(file);
        write_reason(&queue.failed, file, reason)?;
        match fs::rename(&from, &to) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let _ = fs::remove_file(queue.failed.join(naming::reason_file(file)));
                return Ok(());
            }
            Err(e) => return Err(io_error("move to failed/", &from, e)),
        }
        apply_retention(&queue.failed, &self.inner.options.retention)
    }

    pub(crate) fn replay_now(&self, priority: Priority, replay: &Replay) -> Result<u64, Error> {
        let queue = self.inner.queues.get(priority)?;
        let mut replayed = 0;
        for file in failed_files(&queue.failed)? {
            let path = queue.failed.join(&file.name);
            let Some(body) = read_regular_file(&path).map_err(|e| io_error("read", &path, e))?
            else {
                continue;
            };
            let message = self.inner.serializer.deserialize(&body).ok();
            let letter =
                DeadLetter::new(file.name.clone(), priority, file.reason).with_message(message);
            if !replay.selects(&letter) {
                continue;
            }
            let (body, due) = match &letter.message {
                Some(message) => {
                    let again = replay.replayed(message);
                    (self.inner.serializer.serialize(&again)?, again.due())
                }
                None => (body, unix_now()),
            };
            let name = queue.write(&body, due, self.inner.options.durable)?;
            remove_failed(&queue.failed, &file.name)?;
            if queue.lock().scanned {
                queue.added(&name);
            }
            replayed += 1;
        }
        if replayed > 0 {
            self.inner.wake.notify_waiters();
        }
        Ok(replayed)
    }

    pub(crate) fn purge_now(&self, priority: Priority, state: QueueState) -> Result<u64, Error> {
        let queue = self.inner.queues.get(priority)?;
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
        Ok(purged)
    }

    pub(crate) fn delete_now(&self, priority: Priority, id: &str) -> Result<bool, Error> {
        let queue = self.inner.queues.get(priority)?;
        let is_it = |path: &Path| {
            read_regular_file(path)
                .ok()
                .flatten()
                .and_then(|body| self.inner.serializer.deserialize(&body).ok())
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

/// The names in `folder`; none when it does not exist yet.
fn names(folder: &Path) -> Result<Vec<String>, Error> {
    let entries = match fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error("read", folder, e)),
    };
    Ok(entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect())
}

/// The dead letters' file names in `failed/`: every file but the reason files.
fn failed_names(failed: &Path) -> Result<Vec<String>, Error> {
    Ok(names(failed)?
        .into_iter()
        .filter(|n| !naming::is_reason_file(n))
        .collect())
}

/// The dead letters of `failed/` with their reasons, oldest first.
fn failed_files(failed: &Path) -> Result<Vec<FailedFile>, Error> {
    let mut files: Vec<FailedFile> = failed_names(failed)?
        .into_iter()
        .map(|name| {
            let reason = read_reason(failed, &name);
            FailedFile { name, reason }
        })
        .collect();
    files.sort_by(|a, b| {
        a.reason
            .at
            .total_cmp(&b.reason.at)
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(files)
}

/// Writes the reason file of `file`: into a temporary name, then renamed.
pub(crate) fn write_reason(failed: &Path, file: &str, reason: &DeadReason) -> Result<(), Error> {
    let name = naming::reason_file(file);
    let tmp = failed.join(format!(".{name}.tmp"));
    fs::write(&tmp, reason.to_json()).map_err(|e| io_error("write", &tmp, e))?;
    fs::rename(&tmp, failed.join(&name)).map_err(|e| io_error("write", &tmp, e))
}

/// The reason of `file`, or for a file without a readable reason file (PHP Hermes put it there)
/// an undecodable one dated by the file's time.
fn read_reason(failed: &Path, file: &str) -> DeadReason {
    let at_of_file = || {
        fs::metadata(failed.join(file))
            .and_then(|m| m.modified())
            .map_or(0.0, hermes_core::time::to_unix)
    };
    let recorded = fs::read(failed.join(naming::reason_file(file)))
        .ok()
        .and_then(|bytes| DeadReason::from_json(&bytes));
    match recorded {
        Some(reason) if reason.at > 0.0 => reason,
        Some(mut reason) => {
            reason.at = at_of_file();
            reason
        }
        None => {
            let mut reason = DeadReason::new(DeadKind::Undecodable, "no reason recorded");
            reason.at = at_of_file();
            reason
        }
    }
}

/// Drops the oldest dead letters beyond the retention's count, and those past its age.
fn apply_retention(failed: &Path, retention: &Retention) -> Result<(), Error> {
    let files = failed_files(failed)?;
    let oldest_kept = unix_now() - retention.max_age.as_secs_f64();
    let excess = files.len().saturating_sub(retention.max_count);
    for (n, file) in files.iter().enumerate() {
        if n < excess || file.reason.at < oldest_kept {
            remove_failed(failed, &file.name)?;
        }
    }
    Ok(())
}

/// Removes a dead letter and its reason file.
fn remove_failed(failed: &Path, name: &str) -> Result<(), Error> {
    remove(&failed.join(name))?;
    remove(&failed.join(naming::reason_file(name)))?;
    Ok(())
}

/// Removes a file; `false` when it was not there.
fn remove(path: &Path) -> Result<bool, Error> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_error("delete", path, e)),
    }
}
