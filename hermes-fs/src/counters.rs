//! The counters behind the dashboard's history: a file per bucket in `.counters/` (its counts
//! and until when it is kept, as JSON), changed under the folder's lock and replaced whole;
//! each add also removes the buckets that expired.

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hermes_core::driver::{Counters, async_trait};
use hermes_core::time::unix_now;
use hermes_core::{Error, unique::unique_backend_name};
use serde::{Deserialize, Serialize};

use crate::core::Core;
use crate::error::io_error;
use crate::files::locked;
use crate::naming::COUNTERS_FOLDER;

/// One bucket's file.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Bucket {
    /// Unix seconds: removed after.
    until: f64,
    counts: BTreeMap<String, u64>,
}

fn read_bucket(path: &Path) -> Result<Option<Bucket>, Error> {
    match fs::read(path) {
        // A file another program wrote wrongly reads as no bucket.
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error("read", path, e)),
    }
}

impl Core {
    fn counters_folder(&self) -> PathBuf {
        self.directory.join(COUNTERS_FOLDER)
    }

    fn bucket_path(&self, bucket: &str) -> PathBuf {
        self.counters_folder()
            .join(format!("{}.json", unique_backend_name(bucket)))
    }
}

#[async_trait]
impl Counters for Core {
    async fn add(
        &self,
        bucket: &str,
        counts: &[(String, u64)],
        keep: Duration,
    ) -> Result<(), Error> {
        let folder = self.counters_folder();
        let path = self.bucket_path(bucket);
        let _guard = locked::lock(&folder)?;
        let now = unix_now();
        let mut kept = read_bucket(&path)?
            .filter(|b| b.until > now)
            .unwrap_or_default();
        kept.until = kept.until.max(now + keep.as_secs_f64());
        for (name, n) in counts {
            *kept.counts.entry(name.clone()).or_default() += n;
        }
        let bytes = serde_json::to_vec(&kept).map_err(|e| Error::Driver {
            driver: crate::NAME,
            message: format!("encoding counters: {e}"),
            temporary: false,
            source: None,
        })?;
        locked::replace(&path, &bytes)?;
        let entries = fs::read_dir(&folder).map_err(|e| io_error("list", &folder, e))?;
        for entry in entries.flatten() {
            let other = entry.path();
            if other != path
                && other.extension().is_some_and(|e| e == "json")
                && read_bucket(&other)?.is_none_or(|b| b.until <= now)
            {
                let _ = fs::remove_file(&other);
            }
        }
        Ok(())
    }

    async fn read(&self, buckets: &[String]) -> Result<Vec<(String, Vec<(String, u64)>)>, Error> {
        let now = unix_now();
        let mut read = Vec::new();
        for bucket in buckets {
            if let Some(kept) = read_bucket(&self.bucket_path(bucket))?
                && kept.until > now
                && !kept.counts.is_empty()
            {
                read.push((bucket.clone(), kept.counts.into_iter().collect()));
            }
        }
        Ok(read)
    }
}
