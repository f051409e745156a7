//! One queue folder: `<dir>/<queue>/{tmp,new,processing,failed}`, and the ordered index of its
//! waiting files that lets a worker take the next message without reading the whole folder.

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use hermes_core::Error;

use crate::error::io_error;
use crate::name;

/// The folders of one queue and what this process knows about its `new/` folder.
#[derive(Debug)]
pub(crate) struct QueueDir {
    pub(crate) name: String,
    root: PathBuf,
    pub(crate) tmp: PathBuf,
    pub(crate) new: PathBuf,
    pub(crate) processing: PathBuf,
    pub(crate) failed: PathBuf,
    state: Mutex<IndexState>,
}

/// The waiting files of `new/`, in name (= due) order.
#[derive(Debug, Default)]
pub(crate) struct IndexState {
    /// Whether the folders exist (checked once).
    pub(crate) created: bool,
    /// Whether the index was filled by a full read of `new/`.
    pub(crate) scanned: bool,
    /// Whether change notifications keep the index current.
    pub(crate) watched: bool,
    /// Whether notifications are switched off while a backlog drains (the worker's own claims
    /// would otherwise wake it for every message); switched on again when the index runs dry.
    pub(crate) paused: bool,
    /// Set when notifications may have been lost: read the folder again.
    pub(crate) rescan: bool,
    pub(crate) files: BTreeSet<String>,
    /// Names in `new/` that are not message files (foreign names, links, folders): kept, skipped.
    pub(crate) ignored: HashSet<String>,
}

/// What the head of a queue holds.
pub(crate) enum Head {
    /// A due file, taken out of the index for this caller to claim.
    Due(String),
    /// The first file is due at this Unix time.
    NotDue(f64),
    Empty,
}

impl QueueDir {
    pub(crate) fn new(directory: &Path, name: &str) -> Self {
        let root = directory.join(name);
        QueueDir {
            name: name.to_owned(),
            tmp: root.join("tmp"),
            new: root.join("new"),
            processing: root.join("processing"),
            failed: root.join("failed"),
            root,
            state: Mutex::default(),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, IndexState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates the folders (mode 0775 minus the umask) the first time.
    pub(crate) fn ensure_created(&self) -> Result<(), Error> {
        if self.lock().created {
            return Ok(());
        }
        self.create()
    }

    /// Creates the folders that are missing.
    fn create(&self) -> Result<(), Error> {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true).mode(0o775);
        for dir in [&self.tmp, &self.new, &self.processing, &self.failed] {
            builder
                .create(dir)
                .map_err(|e| io_error("create the queue folder", dir, e))?;
        }
        self.lock().created = true;
        Ok(())
    }

    /// Writes `body` as a new message file due at `due`: into `tmp/`, then renamed into `new/`,
    /// so a reader never sees a partial file. With `durable`, the file and `new/` are flushed to
    /// disk first. Returns the file name.
    pub(crate) fn write(&self, body: &[u8], due: f64, durable: bool) -> Result<String, Error> {
        let file_name = name::message_file(due);
        let tmp_path = self.tmp.join(&file_name);
        let written = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o664)
            .open(&tmp_path)
            .and_then(|mut file| {
                file.write_all(body)?;
                if durable {
                    file.sync_all()?;
                }
                Ok(())
            });
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp_path);
            return Err(io_error("write", &tmp_path, e));
        }
        let new_path = self.new.join(&file_name);
        if let Err(e) = fs::rename(&tmp_path, &new_path) {
            let _ = fs::remove_file(&tmp_path);
            return Err(io_error("move the message into", &new_path, e));
        }
        if durable {
            sync_dir(&self.new).map_err(|e| io_error("flush", &self.new, e))?;
        }
        Ok(file_name)
    }

    /// Reads `new/` whole and rebuilds the index.
    pub(crate) fn scan(&self) -> Result<(), Error> {
        let entries = fs::read_dir(&self.new).map_err(|e| io_error("read", &self.new, e))?;
        let mut files = BTreeSet::new();
        let mut foreign = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error("read", &self.new, e))?;
            let Ok(file_name) = entry.file_name().into_string() else {
                foreign.push(entry.file_name().to_string_lossy().into_owned());
                continue;
            };
            let regular = entry.file_type().is_ok_and(|t| t.is_file());
            if regular && name::due_of(&file_name).is_some() {
                files.insert(file_name);
            } else {
                foreign.push(file_name);
            }
        }
        let mut state = self.lock();
        for file_name in foreign {
            if state.ignored.insert(file_name.clone()) {
                tracing::warn!(
                    "Skipping {}: not a Hermes message file; it is left in place",
                    self.new.join(&file_name).display()
                );
            }
        }
        state.files = files;
        state.scanned = true;
        state.rescan = false;
        Ok(())
    }

    /// Takes the first due file out of the index.
    pub(crate) fn head(&self, now: f64) -> Head {
        let mut state = self.lock();
        let Some(first) = state.files.first() else {
            return Head::Empty;
        };
        match name::due_of(first) {
            Some(due) if due > now => Head::NotDue(due),
            _ => Head::Due(state.files.pop_first().expect("the index has a first file")),
        }
    }

    /// Notes a file that appeared in `new/`.
    pub(crate) fn added(&self, file_name: &str) {
        if name::due_of(file_name).is_some() {
            let mut state = self.lock();
            if !state.ignored.contains(file_name) {
                state.files.insert(file_name.to_owned());
            }
        }
    }

    /// Notes a file that left `new/`.
    pub(crate) fn removed(&self, file_name: &str) {
        self.lock().files.remove(file_name);
    }

    /// Claims `file_name` by renaming it into `processing/` under `claimed`, then reads it.
    /// `Ok(None)` when another worker claimed it first; a file that is not a regular file is
    /// put back, remembered as foreign, and also gives `Ok(None)`.
    pub(crate) fn claim(&self, file_name: &str, claimed: &str) -> Result<Option<Vec<u8>>, Error> {
        let from = self.new.join(file_name);
        let to = self.processing.join(claimed);
        let mut renamed = fs::rename(&from, &to);
        if matches!(&renamed, Err(e) if e.kind() == io::ErrorKind::NotFound) && from.exists() {
            // The file is there, so `processing/` is not: someone removed the folders.
            self.create()?;
            renamed = fs::rename(&from, &to);
        }
        match renamed {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                self.added(file_name);
                return Err(io_error("claim", &from, e));
            }
        }
        match read_regular_file(&to) {
            Ok(body) => Ok(Some(body)),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::EISDIR)) => {
                // A link or a folder: never follow or read it; put it back and skip it.
                let _ = fs::rename(&to, &from);
                self.lock().ignored.insert(file_name.to_owned());
                tracing::warn!(
                    "Skipping {}: not a regular file; it is left in place",
                    from.display()
                );
                Ok(None)
            }
            Err(e) => {
                let _ = fs::rename(&to, &from);
                self.added(file_name);
                Err(io_error("read", &to, e))
            }
        }
    }

    /// Moves a claimed file to `failed/`; returns where it went.
    pub(crate) fn quarantine(&self, claimed: &str, file_name: &str) -> PathBuf {
        let to = self.failed.join(file_name);
        if let Err(e) = fs::rename(self.processing.join(claimed), &to) {
            tracing::error!("Cannot move {claimed} to {}: {e}", to.display());
        }
        to
    }

    /// Deletes a claimed file. A file already gone (its claim expired and it was delivered
    /// again) is not an error.
    pub(crate) fn delete(&self, claimed: &str) -> Result<(), Error> {
        let path = self.processing.join(claimed);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_error("delete", &path, e)),
            _ => Ok(()),
        }
    }

    /// Moves a claimed file back to `new/` under its original name.
    pub(crate) fn give_back(&self, claimed: &str, file_name: &str) -> Result<bool, Error> {
        let from = self.processing.join(claimed);
        match fs::rename(&from, self.new.join(file_name)) {
            Ok(()) => {
                self.added(file_name);
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error("give back", &from, e)),
        }
    }

    /// Renames a claimed file to a new claim time; `false` when the claim is gone.
    pub(crate) fn reclaim_as(&self, claimed: &str, renamed: &str) -> Result<bool, Error> {
        let from = self.processing.join(claimed);
        match fs::rename(&from, self.processing.join(renamed)) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error("extend the claim of", &from, e)),
        }
    }

    /// Moves files claimed before `expired_before` back to `new/`. Returns the earliest claim
    /// time still in `processing/`, if any.
    pub(crate) fn return_expired(&self, expired_before: f64) -> Result<Option<f64>, Error> {
        let entries = match fs::read_dir(&self.processing) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error("read", &self.processing, e)),
        };
        let mut earliest: Option<f64> = None;
        for entry in entries.flatten() {
            let Ok(claimed) = entry.file_name().into_string() else {
                continue;
            };
            let Some((claim, file_name)) = name::parse_claimed(&claimed) else {
                continue;
            };
            if claim <= expired_before {
                if self.give_back(&claimed, file_name)? {
                    tracing::warn!(
                        "Message file {file_name} of queue {} was claimed but not finished in time; delivering it again",
                        self.name
                    );
                }
            } else {
                earliest = Some(earliest.map_or(claim, |e: f64| e.min(claim)));
            }
        }
        Ok(earliest)
    }

    /// The queue's folder.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }
}

/// Reads a file without following a symbolic link.
fn read_regular_file(path: &Path) -> io::Result<Vec<u8>> {
    let mut file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let mut body = Vec::with_capacity(file.metadata().map_or(0, |m| m.len() as usize));
    file.read_to_end(&mut body)?;
    Ok(body)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}
