//! Unique jobs: a held key is the file `.unique/<name>.lock` beside the queue folders (no queue
//! name starts with `.`, and PHP Hermes never reads the folder), holding the id of the message
//! that holds it and when it expires. It is made whole under a temporary name and linked into
//! place, which fails when the file is there: of concurrent emits, from any process on the
//! machine, one takes the key.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use hermes_core::time::unix_now;
use hermes_core::{Emitted, Error, Message, Priority, Unique, unique_backend_name};

use crate::FileSystemDriver;
use crate::error::io_error;

/// The folder of the held keys, beside the queues.
pub(crate) const UNIQUE_FOLDER: &str = ".unique";

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

    /// `None` for a file that is not a held key's (damaged): it counts as expired.
    fn read(path: &Path) -> Result<Option<Held>, std::io::Error> {
        let text = fs::read_to_string(path)?;
        let mut lines = text.lines();
        let holder = lines.next().unwrap_or_default().to_owned();
        let until = lines.next().and_then(|l| l.parse::<f64>().ok());
        Ok(until.map(|until| Held { holder, until }))
    }
}

impl FileSystemDriver {
    fn unique_folder(&self) -> PathBuf {
        self.directory().join(UNIQUE_FOLDER)
    }

    fn lock_path(&self, key: &str) -> PathBuf {
        self.unique_folder()
            .join(format!("{}.lock", unique_backend_name(key)))
    }

    /// Takes the key of `unique` for `message` and queues it, or answers that it is held.
    pub(crate) async fn send_unique_now(
        &self,
        message: &Message,
        priority: Priority,
        unique: &Unique,
    ) -> Result<Emitted, Error> {
        message.check()?;
        // Refused before the key is taken: an unknown priority, a message that cannot be
        // encoded.
        self.inner.queues.get(priority)?;
        self.inner.serializer.serialize(message)?;
        let held = Held {
            holder: message.id().to_owned(),
            until: unix_now() + unique.window().as_secs_f64(),
        };
        if !self.take_key(unique.key(), &held)? {
            return Ok(Emitted::Duplicate);
        }
        if let Err(e) = hermes_core::Driver::send(self, message, priority).await {
            self.give_up_key(unique.key(), message.id())?;
            return Err(e);
        }
        Ok(Emitted::Queued)
    }

    /// Whether `held` took `key`: the key's file was absent or expired.
    fn take_key(&self, key: &str, held: &Held) -> Result<bool, Error> {
        let folder = self.unique_folder();
        fs::create_dir_all(&folder).map_err(|e| io_error("create", &folder, e))?;
        let path = self.lock_path(key);
        let tmp = folder.join(format!(".{}.tmp", uuid_like()));
        fs::write(&tmp, held.to_bytes()).map_err(|e| io_error("write", &tmp, e))?;
        let taken = self.link_or_take_over(&tmp, &path);
        let _ = fs::remove_file(&tmp);
        taken
    }

    /// Links `tmp` as `path`; when `path` is there and expired, moves it away first (one
    /// process wins the move) and tries once more.
    fn link_or_take_over(&self, tmp: &Path, path: &Path) -> Result<bool, Error> {
        for _ in 0..2 {
            match fs::hard_link(tmp, path) {
                Ok(()) => return Ok(true),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_error("write", path, e)),
            }
            let current = match Held::read(path) {
                Ok(current) => current,
                // Given up meanwhile: try again.
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error("read", path, e)),
            };
            if current.as_ref().is_some_and(|c| c.until > unix_now()) {
                return Ok(false);
            }
            let expired = path.with_extension(format!("expired-{}", uuid_like()));
            match fs::rename(path, &expired) {
                Ok(()) => {
                    // Another process may have taken the key over between the read and the
                    // move: then what was moved is its live key, which goes back.
                    let moved = Held::read(&expired).ok().flatten();
                    if moved.is_some() && moved != current {
                        let restored = fs::hard_link(&expired, path).is_ok();
                        let _ = fs::remove_file(&expired);
                        if restored {
                            return Ok(false);
                        }
                        continue;
                    }
                    let _ = fs::remove_file(&expired);
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("move away the expired key", path, e)),
            }
        }
        Ok(false)
    }

    /// Removes `key`'s file when `holder` holds it.
    pub(crate) fn give_up_key(&self, key: &str, holder: &str) -> Result<(), Error> {
        let path = self.lock_path(key);
        match Held::read(&path) {
            Ok(Some(held)) if held.holder == holder => match fs::remove_file(&path) {
                Err(e) if e.kind() != ErrorKind::NotFound => Err(io_error("remove", &path, e)),
                _ => Ok(()),
            },
            Err(e) if e.kind() != ErrorKind::NotFound => Err(io_error("read", &path, e)),
            _ => Ok(()),
        }
    }
}

/// A random name part, unique enough for temporary files of concurrent processes.
fn uuid_like() -> String {
    format!("{}-{:016x}", std::process::id(), rand::random::<u64>())
}
