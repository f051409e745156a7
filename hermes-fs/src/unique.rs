//! Unique jobs: a held key is the file `.unique/<name>.lock` beside the queue folders (no queue
//! name starts with `.`, and PHP Hermes never reads the folder), holding the id of the message
//! that holds it and when it expires. Keys are per directory, shared by its queues. Every
//! look at a key and every change to it happens under an exclusive lock of
//! `.unique/.guard` (`flock`), so of concurrent emits, from any process on the machine, one
//! takes the key; expired key files are swept now and then under the same lock.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use hermes_core::driver::{UniqueEmits, async_trait, unique_backend_name};
use hermes_core::time::unix_now;
use hermes_core::{Emitted, Error, Message, Priority, Unique};

use crate::core::Core;
use crate::error::io_error;
use crate::files::locked::{self, Guard};
use crate::naming::UNIQUE_FOLDER;

/// How often, at most, a process sweeps expired key files: every minute.
const SWEEP_EVERY: f64 = 60.0;

/// When this process last swept, as Unix seconds.
static LAST_SWEEP: AtomicU64 = AtomicU64::new(0);

/// A held key's file: who holds it, until when.
#[derive(Debug, PartialEq)]
struct Held {
    holder: String,
    until: f64,
}

impl Held {
    fn to_bytes(&self) -> Vec<u8> {
        format!("{}\n{}\n", self.holder, self.until).into_bytes()
    }

    /// The key file at `path`; `None` when there is none, or it is damaged (it then counts
    /// as expired).
    fn read(path: &Path) -> Result<Option<Held>, std::io::Error> {
        let text = match fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut lines = text.lines();
        let holder = lines.next().unwrap_or_default().to_owned();
        let until = lines.next().and_then(|l| l.parse::<f64>().ok());
        Ok(until.map(|until| Held { holder, until }))
    }
}

#[async_trait]
impl UniqueEmits for Core {
    /// Takes the key of `unique` for `message` and queues it, or answers that it is held.
    async fn send_unique(
        &self,
        message: &Message,
        priority: Priority,
        unique: &Unique,
    ) -> Result<Emitted, Error> {
        // Refused before the key is taken: an unknown priority, a message that cannot be
        // encoded.
        let (queue, body) = self.encode(message, priority)?;
        let held = Held {
            holder: message.id().to_owned(),
            until: unix_now() + unique.window().as_secs_f64(),
        };
        if !self.take_key(unique.key(), &held)? {
            return Ok(Emitted::Duplicate);
        }
        if let Err(e) = self.write_encoded(&queue, body, message.due()).await {
            self.give_up_key(unique.key(), message.id())?;
            return Err(e);
        }
        Ok(Emitted::Queued)
    }

    async fn release(&self, key: &str, holder: &str) -> Result<(), Error> {
        self.give_up_key(key, holder)
    }
}

impl Core {
    fn unique_folder(&self) -> PathBuf {
        self.directory.join(UNIQUE_FOLDER)
    }

    fn lock_path(&self, key: &str) -> PathBuf {
        self.unique_folder()
            .join(format!("{}.lock", unique_backend_name(key)))
    }

    /// Locks the keys' folder against every other process and task.
    fn guard(&self) -> Result<Guard, Error> {
        locked::lock(&self.unique_folder())
    }

    /// Whether `held` took `key`: the key's file was absent or expired.
    fn take_key(&self, key: &str, held: &Held) -> Result<bool, Error> {
        let _guard = self.guard()?;
        let path = self.lock_path(key);
        let now = unix_now();
        if Held::read(&path)
            .map_err(|e| io_error("read", &path, e))?
            .is_some_and(|current| current.until > now)
        {
            return Ok(false);
        }
        locked::replace(&path, &held.to_bytes())?;
        self.sweep_now_and_then(now);
        Ok(true)
    }

    /// Removes `key`'s file when `holder` holds it.
    fn give_up_key(&self, key: &str, holder: &str) -> Result<(), Error> {
        let _guard = self.guard()?;
        let path = self.lock_path(key);
        match Held::read(&path) {
            Ok(Some(held)) if held.holder == holder => match fs::remove_file(&path) {
                Err(e) if e.kind() != ErrorKind::NotFound => Err(io_error("remove", &path, e)),
                _ => Ok(()),
            },
            Err(e) => Err(io_error("read", &path, e)),
            _ => Ok(()),
        }
    }

    /// Removes the expired key files, at most once a minute per process; the caller holds the
    /// guard. A failure is left for the next sweep.
    fn sweep_now_and_then(&self, now: f64) {
        let last = LAST_SWEEP.load(Ordering::Relaxed) as f64;
        if now - last < SWEEP_EVERY {
            return;
        }
        LAST_SWEEP.store(now as u64, Ordering::Relaxed);
        let Ok(entries) = fs::read_dir(self.unique_folder()) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "lock")
                && Held::read(&path)
                    .ok()
                    .is_some_and(|held| held.is_none_or(|h| h.until <= now))
            {
                let _ = fs::remove_file(&path);
            }
        }
    }
}
