//! Live workers: each running dispatcher's announcement is the file `workers/<id>.json` beside
//! the queue folders, written whole (to a temporary name, then renamed). PHP Hermes never reads
//! `workers/`, and no queue may take that name.

use std::fs;
use std::path::PathBuf;

use std::time::Duration;

use hermes_core::Error;
use hermes_core::driver::{Workers, async_trait};
use hermes_core::time::unix_now;
use hermes_core::workers::WorkerInfo;

use crate::core::Core;
use crate::error::io_error;
use crate::naming::WORKERS_FOLDER;

#[async_trait]
impl Workers for Core {
    async fn announce(&self, worker: &WorkerInfo, ttl: Duration) -> Result<(), Error> {
        let worker = worker.expiring_in(ttl);
        let folder = self.workers_folder();
        fs::create_dir_all(&folder).map_err(|e| io_error("create", &folder, e))?;
        let name = file_name(&worker.id)?;
        let tmp = folder.join(format!(".{name}.tmp"));
        fs::write(&tmp, worker.to_json()).map_err(|e| io_error("write", &tmp, e))?;
        fs::rename(&tmp, folder.join(&name)).map_err(|e| io_error("write", &tmp, e))
    }

    async fn withdraw(&self, id: &str) -> Result<(), Error> {
        let path = self.workers_folder().join(file_name(id)?);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_error("remove", &path, e)),
            _ => Ok(()),
        }
    }

    /// The announcements that hold, oldest worker first; expired ones are removed.
    async fn list(&self) -> Result<Vec<WorkerInfo>, Error> {
        let folder = self.workers_folder();
        let entries = match fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error("read", &folder, e)),
        };
        let now = unix_now();
        let mut workers = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name
                .to_str()
                .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
            else {
                continue;
            };
            let Some(worker) = fs::read(folder.join(name))
                .ok()
                .and_then(|bytes| WorkerInfo::from_json(&bytes))
            else {
                continue;
            };
            if worker.is_alive_at(now) {
                workers.push(worker);
            } else {
                let _ = fs::remove_file(folder.join(name));
            }
        }
        workers.sort_by(|a, b| a.started.total_cmp(&b.started));
        Ok(workers)
    }
}

impl Core {
    fn workers_folder(&self) -> PathBuf {
        self.directory.join(WORKERS_FOLDER)
    }
}

/// The file of worker `id`: its id must be a plain name.
fn file_name(id: &str) -> Result<String, Error> {
    hermes_core::driver::validate_queue_name(id)?;
    Ok(format!("{id}.json"))
}
