//! Pauses and cancellations: the files `.flow/paused.json` (what is paused) and
//! `.flow/cancellations.json` (the requests of the last 30 days) beside the queue folders,
//! changed under the exclusive lock of `.flow/.guard`. They hold for every queue of the
//! directory.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use hermes_core::Error;
use hermes_core::driver::{Controls, async_trait};
use hermes_core::flow::{CANCELLATIONS_KEPT, Cancellation, PauseTarget};
use hermes_core::time::unix_now;
use serde::{Deserialize, Serialize};

use crate::core::Core;
use crate::error::io_error;
use crate::files::locked;
use crate::naming::FLOW_FOLDER;

/// A cancellation as the file keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    id: String,
    by: String,
    at: f64,
}

/// The JSON file at `path` as `T`; the default when there is none or it is damaged.
fn read<T: Default + for<'de> Deserialize<'de>>(path: &Path) -> Result<T, Error> {
    match fs::read(path) {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).unwrap_or_default()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(io_error("read", path, e)),
    }
}

fn write(path: &Path, value: &impl Serialize) -> Result<(), Error> {
    let bytes = serde_json::to_vec(value).map_err(|e| io_error("write", path, e.into()))?;
    locked::replace(path, &bytes)
}

impl Core {
    fn flow_folder(&self) -> PathBuf {
        self.directory.join(FLOW_FOLDER)
    }

    /// Changes the pauses with `change` under the lock; returns what it returned.
    fn change_pauses<T>(&self, change: impl FnOnce(&mut Vec<String>) -> T) -> Result<T, Error> {
        let folder = self.flow_folder();
        let _guard = locked::lock(&folder)?;
        let path = folder.join("paused.json");
        let mut paused: Vec<String> = read(&path)?;
        let out = change(&mut paused);
        write(&path, &paused)?;
        Ok(out)
    }
}

#[async_trait]
impl Controls for Core {
    async fn pause(&self, target: &PauseTarget) -> Result<(), Error> {
        let target = target.to_string();
        self.change_pauses(|paused| {
            if !paused.contains(&target) {
                paused.push(target);
            }
        })
    }

    async fn resume(&self, target: &PauseTarget) -> Result<bool, Error> {
        let target = target.to_string();
        self.change_pauses(|paused| {
            let before = paused.len();
            paused.retain(|t| *t != target);
            paused.len() < before
        })
    }

    async fn paused(&self) -> Result<Vec<PauseTarget>, Error> {
        let paused: Vec<String> = read(&self.flow_folder().join("paused.json"))?;
        // What another program wrote wrongly pauses nothing.
        let mut paused: Vec<PauseTarget> = paused.iter().filter_map(|t| t.parse().ok()).collect();
        paused.sort();
        Ok(paused)
    }

    async fn cancel(&self, cancellation: &Cancellation) -> Result<(), Error> {
        let folder = self.flow_folder();
        let _guard = locked::lock(&folder)?;
        let path = folder.join("cancellations.json");
        let mut records: Vec<Record> = read(&path)?;
        let oldest = unix_now() - CANCELLATIONS_KEPT.as_secs_f64();
        records.retain(|r| r.id != cancellation.id && r.at >= oldest);
        records.push(Record {
            id: cancellation.id.clone(),
            by: cancellation.by.clone(),
            at: cancellation.at,
        });
        records.sort_by(|a, b| a.at.total_cmp(&b.at));
        write(&path, &records)
    }

    async fn cancellations(&self, since: f64) -> Result<Vec<Cancellation>, Error> {
        let records: Vec<Record> = read(&self.flow_folder().join("cancellations.json"))?;
        let from = since.max(unix_now() - CANCELLATIONS_KEPT.as_secs_f64());
        Ok(records
            .into_iter()
            .filter(|r| r.at >= from)
            .map(|r| {
                let mut cancellation = Cancellation::new(r.id, r.by);
                cancellation.at = r.at;
                cancellation
            })
            .collect())
    }
}
