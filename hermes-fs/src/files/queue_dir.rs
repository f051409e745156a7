//! One queue folder: `<dir>/<queue>/{tmp,new,processing,failed}`, and the ordered index of its
//! waiting files that lets a worker take the next message without reading the whole folder.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use hermes_core::Error;

use crate::error::io_error;
use crate::naming;

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

/// A waiting file of `new/`, ordered by the due time its name starts with (then by name), so
/// names of any width sort right, PHP's included.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Waiting {
    pub(crate) due: f64,
    pub(crate) name: String,
}

impl Waiting {
    /// The entry of `file_name`, when it is a message file name.
    fn of(file_name: &str) -> Option<Self> {
        naming::due_of(file_name).map(|due| Waiting {
            due,
            name: file_name.to_owned(),
        })
    }
}

impl Eq for Waiting {}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiting {
    fn cmp(&self, other: &Self) -> Ordering {
        self.due
            .total_cmp(&other.due)
            .then_with(|| self.name.cmp(&other.name))
    }
}

/// The waiting files of `new/`, in due order.
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
    pub(crate) files: BTreeSet<Waiting>,
    /// Names in `new/` that are not message files (foreign names, links, folders, FIFOs,
    /// sockets, unreadable files): kept, skipped. A full read of `new/` tries a regular file
    /// among them again.
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
        let file_name = naming::message_file(due);
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
            match Waiting::of(&file_name) {
                Some(waiting) if regular => {
                    files.insert(waiting);
                }
                _ => foreign.push(file_name),
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
        if first.due > now {
            return Head::NotDue(first.due);
        }
        let first = state.files.pop_first().expect("the index has a first file");
        Head::Due(first.name)
    }

    /// Notes a file that appeared in `new/`.
    pub(crate) fn added(&self, file_name: &str) {
        if let Some(waiting) = Waiting::of(file_name) {
            let mut state = self.lock();
            if !state.ignored.contains(file_name) {
                state.files.insert(waiting);
            }
        }
    }

    /// Notes a file that left `new/`.
    pub(crate) fn removed(&self, file_name: &str) {
        if let Some(waiting) = Waiting::of(file_name) {
            self.lock().files.remove(&waiting);
        }
    }

    /// Puts a file that cannot be handled back into `new/` from `processing/` and skips it
    /// from now on; the files behind it go on.
    fn skip(&self, claimed_path: &Path, new_path: &Path, file_name: &str, why: &str) {
        let _ = fs::rename(claimed_path, new_path);
        if self.lock().ignored.insert(file_name.to_owned()) {
            tracing::warn!(
                "Skipping {}: {why}; it is left in place",
                new_path.display()
            );
        }
    }

    /// Claims `file_name` by renaming it into `processing/` under `claimed`, then reads it.
    /// `Ok(None)` when another worker claimed it first; a file that is not a regular file, or
    /// that this process may not read, is put back, remembered as foreign, and also gives
    /// `Ok(None)`. Other read errors put it back and are returned.
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
            Ok(Some(body)) => Ok(Some(body)),
            Ok(None) => {
                // A link, a folder, a FIFO, a socket, a device: never followed, opened so that
                // nothing blocks, never read.
                self.skip(&to, &from, file_name, "not a regular file");
                Ok(None)
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                self.skip(&to, &from, file_name, &format!("cannot read it ({e})"));
                Ok(None)
            }
            Err(e) => {
                // Out of file descriptors, an I/O error: it may pass, so the file stays queued.
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

    /// Moves a claimed file back to `new/` under a new name due at `due`: a message put in
    /// `new/` ahead of its `execute_at` then waits for it, for every reader of the folder.
    pub(crate) fn postpone(&self, claimed: &str, due: f64) -> Result<(), Error> {
        let from = self.processing.join(claimed);
        let file_name = naming::message_file(due);
        fs::rename(&from, self.new.join(&file_name)).map_err(|e| io_error("postpone", &from, e))?;
        self.added(&file_name);
        Ok(())
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
            let Some((claim, file_name)) = naming::parse_claimed(&claimed) else {
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

/// Reads a regular file; `Ok(None)` for anything else. A symbolic link is not followed, and the
/// file is opened without blocking (a FIFO would block the open until a writer came) and
/// checked before anything is read.
pub(crate) fn read_regular_file(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let opened = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let mut file = match opened {
        Ok(file) => file,
        // A link (ELOOP), a socket (ENXIO), a folder on some systems (EISDIR).
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ELOOP | libc::ENXIO | libc::EISDIR)
            ) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let metadata = file.metadata()?;
    if !metadata.file_type().is_file() {
        return Ok(None);
    }
    let mut body = Vec::with_capacity(metadata.len() as usize);
    file.read_to_end(&mut body)?;
    Ok(Some(body))
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}
