//! The files and folders a queue is made of: one queue folder and its index, the change
//! notifications that keep indexes current, and reading and removing files safely.

use std::fs;
use std::io;
use std::path::Path;

use hermes_core::Error;

use crate::error::io_error;

pub(crate) mod locked;
mod queue_dir;
mod watch;

pub(crate) use queue_dir::{Head, QueueDir, read_regular_file};
pub(crate) use watch::Watcher;

/// The names of the regular files in `folder`; none when it does not exist yet.
pub(crate) fn names(folder: &Path) -> Result<Vec<String>, Error> {
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

/// Removes a file; `false` when it was not there.
pub(crate) fn remove(path: &Path) -> Result<bool, Error> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_error("delete", path, e)),
    }
}
