//! Folders whose files change only under an exclusive lock of the folder's `.guard` file
//! (`flock`), so processes on the machine take turns, and files replaced whole (written aside,
//! then renamed over), so a reader never sees half a file.

use std::fs::{self, File};
use std::path::Path;

use hermes_core::Error;

use crate::error::io_error;

/// The exclusive lock of a folder, released when dropped (the file closes).
pub(crate) struct Guard(#[allow(dead_code)] File);

/// Locks `folder` (creating it) against every other process and task.
pub(crate) fn lock(folder: &Path) -> Result<Guard, Error> {
    fs::create_dir_all(folder).map_err(|e| io_error("create", folder, e))?;
    let path = folder.join(".guard");
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| io_error("open", &path, e))?;
    file.lock().map_err(|e| io_error("lock", &path, e))?;
    Ok(Guard(file))
}

/// Replaces the file `path` (in a folder the caller has locked) with `bytes`.
pub(crate) fn replace(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let folder = path.parent().unwrap_or(Path::new("."));
    let tmp = folder.join(format!(
        ".{}-{:016x}.tmp",
        std::process::id(),
        rand::random::<u64>()
    ));
    fs::write(&tmp, bytes).map_err(|e| io_error("write", &tmp, e))?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(io_error("write", path, e));
    }
    Ok(())
}
