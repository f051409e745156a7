//! Dead letters in `failed/`: a message whose handler failed for good goes there under its
//! name in `new/`, where Hermes also puts the files it cannot decode, beside a `<name>.reason`
//! file holding the reason as JSON (kind, error, handler, time, retries). PHP Hermes never
//! reads `failed/`, so the reason files disturb nothing; a file there without one (PHP put it
//! there) is an undecodable dead letter without a recorded reason.
//! [`FileSystemOptions::retention`](crate::FileSystemOptions::retention) caps the folder.

use std::fs;
use std::io;
use std::path::Path;

use hermes_core::driver::{DeadLetters, Delivery, async_trait};
use hermes_core::inspect::{DeadKind, DeadLetter, DeadReason, Replay, Retention};
use hermes_core::time::unix_now;
use hermes_core::{Error, Priority};

use crate::core::{Claim, Core};
use crate::error::io_error;
use crate::files::{QueueDir, names, read_regular_file, remove};
use crate::naming;

/// One file of `failed/`, with its reason.
struct FailedFile {
    name: String,
    reason: DeadReason,
}

#[async_trait]
impl DeadLetters for Core {
    async fn add(&self, delivery: &Delivery, reason: &DeadReason) -> Result<(), Error> {
        let claim = Claim::of(delivery)?;
        let claimed = claim.claimed();
        self.bury(&claim.queue, &claimed, &claim.file, reason)
    }

    async fn list(&self, priority: Priority, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        let queue = self.queues.get(priority)?;
        self.dead_in(&queue, priority, limit)
    }

    async fn replay(&self, priority: Priority, replay: &Replay) -> Result<u64, Error> {
        let queue = self.queues.get(priority)?;
        let mut replayed = 0;
        for file in failed_files(&queue.failed)? {
            let path = queue.failed.join(&file.name);
            let Some(body) = read_regular_file(&path).map_err(|e| io_error("read", &path, e))?
            else {
                continue;
            };
            let message = self.serializer.deserialize(&body).ok();
            let letter =
                DeadLetter::new(file.name.clone(), priority, file.reason).with_message(message);
            if !replay.selects(&letter) {
                continue;
            }
            let (body, due) = match &letter.message {
                Some(message) => {
                    let again = replay.replayed(message);
                    (self.serializer.serialize(&again)?, again.due())
                }
                None => (body, unix_now()),
            };
            let name = queue.write(&body, due, self.options.durable)?;
            remove_failed(&queue.failed, &file.name)?;
            if queue.lock().scanned {
                queue.added(&name);
            }
            replayed += 1;
        }
        if replayed > 0 {
            self.wake.notify_waiters();
        }
        Ok(replayed)
    }
}

impl Core {
    /// Up to `limit` dead letters of `queue`, oldest first.
    pub(crate) fn dead_in(
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
                    .and_then(|body| self.serializer.deserialize(&body).ok());
                DeadLetter::new(file.name, priority, file.reason).with_message(message)
            })
            .collect())
    }

    /// Moves the claimed file `claimed` (named `file` in `new/`) to `failed/` with `reason`,
    /// then applies the retention. A claim that is gone (it expired, and the file was given
    /// back) is left alone.
    fn bury(
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
        apply_retention(&queue.failed, &self.options.retention)
    }
}

/// The dead letters' file names in `failed/`: every file but the reason files.
pub(crate) fn failed_names(failed: &Path) -> Result<Vec<String>, Error> {
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
pub(crate) fn remove_failed(failed: &Path, name: &str) -> Result<(), Error> {
    remove(&failed.join(name))?;
    remove(&failed.join(naming::reason_file(name)))?;
    Ok(())
}
