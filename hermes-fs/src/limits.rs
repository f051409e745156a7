//! The limit store: per bound, the file `.flow/limits/<hash of its name>.json` beside the queue
//! folders (PHP Hermes never reads it), holding the bound's slots (holder → end of its lease)
//! and its starts, in Unix seconds of this machine's clock. Every admission, renewal and
//! release happens under the exclusive lock of `.flow/limits/.guard`, so processes on the
//! machine count against one figure; files of idle bounds are swept now and then.

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hermes_core::Error;
use hermes_core::driver::{LimitStore, async_trait, unique_backend_name};
use hermes_core::flow::{Admission, Bound};
use hermes_core::time::unix_now;
use serde::{Deserialize, Serialize};

use crate::core::Core;
use crate::error::io_error;
use crate::files::locked;
use crate::naming::FLOW_FOLDER;

/// How often, at most, a process sweeps the files of idle bounds: every minute.
const SWEEP_EVERY: f64 = 60.0;

/// When this process last swept, as Unix seconds.
static LAST_SWEEP: AtomicU64 = AtomicU64::new(0);

/// What one bound's file holds.
#[derive(Debug, Default, Serialize, Deserialize)]
struct BoundFile {
    /// Holder → end of its lease.
    slots: BTreeMap<String, f64>,
    /// Start times, oldest first.
    starts: Vec<f64>,
    /// The rate's period, in seconds (0 for slots).
    period: f64,
}

impl BoundFile {
    /// The file at `path`; empty when there is none or it is damaged.
    fn read(path: &Path) -> Result<BoundFile, Error> {
        match fs::read(path) {
            Ok(bytes) => Ok(serde_json::from_slice(&bytes).unwrap_or_default()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(BoundFile::default()),
            Err(e) => Err(io_error("read", path, e)),
        }
    }

    /// Drops the slots and starts over at `now`.
    fn expire(&mut self, now: f64) {
        self.slots.retain(|_, until| *until > now);
        let period = self.period;
        self.starts.retain(|at| *at > now - period);
    }

    fn is_empty(&self) -> bool {
        self.slots.is_empty() && self.starts.is_empty()
    }

    /// Writes it, or removes the file when nothing is left.
    fn write(&self, path: &Path) -> Result<(), Error> {
        if self.is_empty() {
            return crate::files::remove(path).map(drop);
        }
        let bytes = serde_json::to_vec(self).map_err(|e| io_error("write", path, e.into()))?;
        locked::replace(path, &bytes)
    }
}

impl Core {
    fn limits_folder(&self) -> PathBuf {
        self.directory.join(FLOW_FOLDER).join("limits")
    }

    fn bound_path(&self, name: &str) -> PathBuf {
        self.limits_folder()
            .join(format!("{}.json", unique_backend_name(name)))
    }

    /// Removes the files of bounds with nothing left, at most once a minute per process; the
    /// caller holds the lock. A failure is left for the next sweep.
    fn sweep_bounds_now_and_then(&self, now: f64) {
        let last = LAST_SWEEP.load(Ordering::Relaxed) as f64;
        if now - last < SWEEP_EVERY {
            return;
        }
        LAST_SWEEP.store(now as u64, Ordering::Relaxed);
        let Ok(entries) = fs::read_dir(self.limits_folder()) else {
            return;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if path.extension().is_some_and(|e| e == "json")
                && let Ok(mut file) = BoundFile::read(&path)
            {
                file.expire(now);
                if file.is_empty() {
                    let _ = fs::remove_file(&path);
                }
            }
        }
    }
}

#[async_trait]
impl LimitStore for Core {
    async fn admit(
        &self,
        holder: &str,
        bounds: &[Bound],
        lease: Duration,
    ) -> Result<Admission, Error> {
        let _guard = locked::lock(&self.limits_folder())?;
        let now = unix_now();
        let mut files = Vec::with_capacity(bounds.len());
        for bound in bounds {
            let path = self.bound_path(bound.name());
            let mut file = BoundFile::read(&path)?;
            let refused = match bound {
                Bound::Starts { rate, .. } => {
                    file.period = rate.period().as_secs_f64();
                    file.expire(now);
                    let max = rate.max() as usize;
                    (file.starts.len() >= max).then(|| {
                        let leaving = file.starts[file.starts.len() - max] + file.period;
                        Some(Duration::from_secs_f64((leaving - now).max(0.0)))
                    })
                }
                Bound::Slots { max, .. } => {
                    file.expire(now);
                    let full = file.slots.len() >= *max as usize;
                    (full && !file.slots.contains_key(holder)).then_some(None)
                }
                _ => None,
            };
            if let Some(retry_after) = refused {
                return Ok(Admission::Refused {
                    name: bound.name().to_owned(),
                    retry_after,
                });
            }
            files.push((path, file));
        }
        for ((path, mut file), bound) in files.into_iter().zip(bounds) {
            match bound {
                Bound::Starts { .. } => file.starts.push(now),
                _ => {
                    file.slots
                        .insert(holder.to_owned(), now + lease.as_secs_f64());
                }
            }
            file.write(&path)?;
        }
        self.sweep_bounds_now_and_then(now);
        Ok(Admission::Admitted)
    }

    async fn renew(&self, holder: &str, names: &[String], lease: Duration) -> Result<bool, Error> {
        let _guard = locked::lock(&self.limits_folder())?;
        let now = unix_now();
        let until = now + lease.as_secs_f64();
        let mut all = true;
        for name in names {
            let path = self.bound_path(name);
            let mut file = BoundFile::read(&path)?;
            match file.slots.get_mut(holder).filter(|end| **end > now) {
                Some(end) if *end < until => {
                    *end = until;
                    file.write(&path)?;
                }
                Some(_) => {}
                None => all = false,
            }
        }
        Ok(all)
    }

    async fn release(&self, holder: &str, names: &[String]) -> Result<(), Error> {
        let _guard = locked::lock(&self.limits_folder())?;
        let now = unix_now();
        for name in names {
            let path = self.bound_path(name);
            let mut file = BoundFile::read(&path)?;
            if file.slots.remove(holder).is_some() {
                file.expire(now);
                file.write(&path)?;
            }
        }
        Ok(())
    }

    async fn usage(&self, bound: &Bound) -> Result<u32, Error> {
        // Files are replaced whole: a read without the lock sees one state or the next.
        let mut file = BoundFile::read(&self.bound_path(bound.name()))?;
        if let Bound::Starts { rate, .. } = bound {
            file.period = rate.period().as_secs_f64();
        }
        file.expire(unix_now());
        let used = file.slots.len() + file.starts.len();
        Ok(u32::try_from(used).unwrap_or(u32::MAX))
    }
}
