use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use super::Shutdown;
use crate::Error;

/// Shutdown through a file, as Hermes' `SharedFileShutdown`: a worker stops when the file's
/// modification time is at or after the second it started, and not in the future (a future
/// time schedules the shutdown). [`shutdown`](Shutdown::shutdown) creates the file or sets its
/// time.
///
/// Times compare in whole seconds, so a PHP process touching the file stops Rust workers and the
/// other way round.
///
/// ```no_run
/// # async fn demo() -> Result<(), hermes_core::Error> {
/// use hermes_core::{SharedFileShutdown, Shutdown};
///
/// SharedFileShutdown::new("/var/run/hermes/shutdown").shutdown(None).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SharedFileShutdown {
    path: PathBuf,
}

impl SharedFileShutdown {
    /// A shutdown signalled through the file at `path`. The file's folder must exist.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SharedFileShutdown { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn whole_seconds(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs_f64().ceil() as u64).unwrap_or(i64::MAX),
    }
}

#[async_trait]
impl Shutdown for SharedFileShutdown {
    async fn should_shutdown(&self, started: SystemTime) -> Result<bool, Error> {
        let modified = match tokio::fs::metadata(&self.path).await {
            Ok(meta) => meta.modified().map_err(|e| {
                Error::io(format!("reading the time of {}", self.path.display()), e)
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Error::io(format!("reading {}", self.path.display()), e)),
        };
        let modified = whole_seconds(modified);
        Ok(whole_seconds(started) <= modified && modified <= whole_seconds(SystemTime::now()))
    }

    async fn shutdown(&self, at: Option<SystemTime>) -> Result<(), Error> {
        let path = self.path.clone();
        let at = at.unwrap_or_else(SystemTime::now);
        tokio::task::spawn_blocking(move || {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
            file.set_modified(at)
                .map_err(|e| Error::io(format!("setting the time of {}", path.display()), e))
        })
        .await
        .map_err(|e| Error::io("touching the shutdown file", std::io::Error::other(e)))?
    }
}
