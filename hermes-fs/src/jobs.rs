//! Job records and groups, in `.jobs/` beside the queue folders (PHP Hermes never reads it): a
//! record is the file `.jobs/records/<hash of its id>.json`; a group is the folder
//! `.jobs/groups/<id>/` holding `group.json` (its spec, counts, release marks) and one file per
//! member in `members/` (empty while pending, its outcome once settled). A group changes only
//! under the exclusive lock of its folder, so processes on the machine settle a member once and
//! release a message once. Expired records and groups are swept now and then.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hermes_core::driver::{
    JobStore, UNFINISHED_GROUP_KEPT, async_trait, claim_mark, claimant_in, mark_in,
    unique_backend_name,
};
use hermes_core::time::unix_now;
use hermes_core::tracking::{
    GroupPage, GroupRequest, GroupSpec, GroupState, JobRecord, RecordPage, RecordRequest, Settled,
    Tally, after_listing_cursor, listing_cursor, parse_listing_cursor,
};
use hermes_core::{Error, Message, Priority};
use serde::{Deserialize, Serialize};

use crate::core::Core;
use crate::error::io_error;
use crate::files::locked;
use crate::naming::JOBS_FOLDER;

/// How often, at most, a process sweeps expired records and groups: every minute.
const SWEEP_EVERY: f64 = 60.0;

/// When this process last swept, as Unix seconds.
static LAST_SWEEP: AtomicU64 = AtomicU64::new(0);

/// A record's file: the record and when it expires.
#[derive(Serialize, Deserialize)]
struct RecordFile {
    expires: f64,
    record: JobRecord,
}

/// A group's `group.json`.
#[derive(Serialize, Deserialize)]
struct GroupFile {
    spec: GroupSpec,
    total: u64,
    succeeded: u64,
    failed: u64,
    #[serde(default)]
    released: Vec<String>,
    #[serde(default)]
    finished: Option<f64>,
    /// How long it is kept once finished, in seconds.
    keep: f64,
    expires: f64,
    /// The member the last settle counted, and its outcome: written with the counts, before
    /// the member's own file, so a settle cut off between the two is completed by whoever
    /// takes the lock next (see [`Core::complete_last_settle`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_settled: Option<(String, Settled)>,
}

impl GroupFile {
    fn tally(&self) -> Tally {
        Tally::new(self.total, self.succeeded, self.failed)
    }

    /// Moves its expiry on from `now`.
    fn touch(&mut self, now: f64) {
        let kept = if self.finished.is_some() {
            self.keep
        } else {
            UNFINISHED_GROUP_KEPT.as_secs_f64()
        };
        self.expires = now + kept;
    }
}

/// Reads `path`; `None` when it is missing.
fn read(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error("read", path, e)),
    }
}

impl Core {
    fn jobs_folder(&self) -> PathBuf {
        self.directory.join(JOBS_FOLDER)
    }

    fn record_path(&self, id: &str) -> PathBuf {
        self.jobs_folder()
            .join("records")
            .join(format!("{}.json", unique_backend_name(id)))
    }

    /// The folder of the group `id`, which must be a valid group id (no separators).
    fn group_folder(&self, id: &str) -> Result<PathBuf, Error> {
        hermes_core::tracking::check_group_id(id).map_err(Error::Group)?;
        Ok(self.jobs_folder().join("groups").join(id))
    }

    fn member_path(folder: &Path, member: &str) -> PathBuf {
        folder.join("members").join(unique_backend_name(member))
    }

    /// The group in `folder`, unless it is missing or expired.
    fn read_group(folder: &Path, now: f64) -> Result<Option<GroupFile>, Error> {
        let Some(bytes) = read(&folder.join("group.json"))? else {
            return Ok(None);
        };
        Ok(serde_json::from_slice::<GroupFile>(&bytes)
            .ok()
            .filter(|group| group.expires > now))
    }

    fn write_group(folder: &Path, group: &GroupFile) -> Result<(), Error> {
        let bytes = serde_json::to_vec(group)
            .map_err(|e| Error::InvalidMessage(format!("a group cannot be encoded: {e}")))?;
        locked::replace(&folder.join("group.json"), &bytes)
    }

    /// Writes the outcome of the member the last settle counted into the member's file when a
    /// process was killed before it could: the counts in `group.json` and the members' files
    /// then agree again. Called under the group's lock.
    fn complete_last_settle(folder: &Path, group: &GroupFile) -> Result<(), Error> {
        let Some((member, outcome)) = &group.last_settled else {
            return Ok(());
        };
        let path = Self::member_path(folder, member);
        if read(&path)?.is_some_and(|bytes| bytes.is_empty()) {
            locked::replace(&path, outcome.encode()?.as_bytes())?;
        }
        Ok(())
    }

    /// How many members the group in `folder` has: its files in `members/`, not counting
    /// temporary ones.
    fn count_members(folder: &Path) -> Result<u64, Error> {
        let dir = folder.join("members");
        let entries = fs::read_dir(&dir).map_err(|e| io_error("list", &dir, e))?;
        let mut count = 0;
        for entry in entries {
            let entry = entry.map_err(|e| io_error("list", &dir, e))?;
            // Not the temporary file of a write cut off half way.
            if !entry.file_name().to_string_lossy().starts_with('.') {
                count += 1;
            }
        }
        Ok(count)
    }

    /// Adds the members not there yet; returns how many the group has now. The count comes
    /// from the folder, not from what was added: a process killed after creating the files
    /// and before writing the total leaves them counted by the next join.
    fn add_members(folder: &Path, members: &[String]) -> Result<u64, Error> {
        let dir = folder.join("members");
        fs::create_dir_all(&dir).map_err(|e| io_error("create", &dir, e))?;
        for member in members {
            let path = Self::member_path(folder, member);
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_error("create", &path, e)),
            }
        }
        Self::count_members(folder)
    }

    /// Removes expired records and groups, at most once a minute per process.
    fn sweep_jobs_now_and_then(&self, now: f64) {
        let last = LAST_SWEEP.load(Ordering::Relaxed) as f64;
        if now - last < SWEEP_EVERY {
            return;
        }
        LAST_SWEEP.store(now as u64, Ordering::Relaxed);
        if let Ok(entries) = fs::read_dir(self.jobs_folder().join("records")) {
            for entry in entries.flatten() {
                let expired = fs::read(entry.path())
                    .ok()
                    .and_then(|b| serde_json::from_slice::<RecordFile>(&b).ok())
                    .is_none_or(|file| file.expires <= now);
                if expired && entry.file_name().to_string_lossy().ends_with(".json") {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
        if let Ok(entries) = fs::read_dir(self.jobs_folder().join("groups")) {
            for entry in entries.flatten() {
                let folder = entry.path();
                let Ok(_guard) = locked::lock(&folder) else {
                    continue;
                };
                if matches!(Self::read_group(&folder, now), Ok(None)) {
                    let _ = fs::remove_dir_all(&folder);
                }
            }
        }
    }
}

#[async_trait]
impl JobStore for Core {
    async fn put(&self, record: &JobRecord, keep: Duration) -> Result<(), Error> {
        let now = unix_now();
        let path = self.record_path(&record.id);
        let folder = path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(folder).map_err(|e| io_error("create", folder, e))?;
        let file = RecordFile {
            expires: now + keep.as_secs_f64(),
            record: record.clone(),
        };
        let bytes = serde_json::to_vec(&file)
            .map_err(|e| Error::InvalidMessage(format!("a job record cannot be encoded: {e}")))?;
        locked::replace(&path, &bytes)?;
        self.sweep_jobs_now_and_then(now);
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<JobRecord>, Error> {
        let Some(bytes) = read(&self.record_path(id))? else {
            return Ok(None);
        };
        // A file another program wrote wrongly reads as none.
        Ok(serde_json::from_slice::<RecordFile>(&bytes)
            .ok()
            .filter(|file| file.expires > unix_now())
            .map(|file| file.record))
    }

    /// Ordered by when each file was last written (under one retention, the order in which
    /// they expire), then by file name.
    async fn records(&self, request: &RecordRequest) -> Result<RecordPage, Error> {
        let cursor = match request.cursor.as_deref() {
            Some(cursor) => Some(parse_listing_cursor(cursor).ok_or_else(|| {
                Error::InvalidMessage("not a cursor of the filesystem's records".to_owned())
            })?),
            None => None,
        };
        let dir = self.jobs_folder().join("records");
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(RecordPage::default()),
            Err(e) => return Err(io_error("list", &dir, e)),
        };
        let mut files: Vec<(f64, String)> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error("list", &dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            // A file removed since the listing is left out.
            let Some(written) = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            else {
                continue;
            };
            let written = written.as_secs_f64();
            if after_listing_cursor(cursor, written, &name) {
                files.push((written, name));
            }
        }
        files.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
        let reads = request.reads();
        let more = files.len() > reads;
        let now = unix_now();
        let mut read_records = Vec::with_capacity(reads.min(files.len()));
        for (written, name) in files.into_iter().take(reads) {
            let record = read(&dir.join(&name))?
                .and_then(|bytes| serde_json::from_slice::<RecordFile>(&bytes).ok())
                .filter(|file| file.expires > now)
                .map(|file| file.record);
            read_records.push((listing_cursor(written, &name), record));
        }
        Ok(request.page_of(read_records, more))
    }

    async fn open(
        &self,
        spec: &GroupSpec,
        members: &[String],
        keep: Duration,
    ) -> Result<(), Error> {
        let folder = self.group_folder(&spec.id)?;
        let _guard = locked::lock(&folder)?;
        let now = unix_now();
        if Self::read_group(&folder, now)?.is_some() {
            return Ok(());
        }
        // What an expired group of the same id left goes first.
        let old = folder.join("members");
        if old.exists() {
            fs::remove_dir_all(&old).map_err(|e| io_error("remove", &old, e))?;
        }
        let total = Self::add_members(&folder, members)?;
        let mut group = GroupFile {
            spec: spec.clone(),
            total,
            succeeded: 0,
            failed: 0,
            released: Vec::new(),
            finished: None,
            keep: keep.as_secs_f64(),
            expires: now,
            last_settled: None,
        };
        group.touch(now);
        Self::write_group(&folder, &group)
    }

    async fn join(&self, group: &str, members: &[String]) -> Result<(), Error> {
        let folder = self.group_folder(group)?;
        let _guard = locked::lock(&folder)?;
        let now = unix_now();
        let Some(mut found) = Self::read_group(&folder, now)? else {
            return Err(Error::Group(format!("there is no group {group}")));
        };
        if found.finished.is_some() {
            return Err(Error::Group(format!(
                "group {group} is finished: every member is done, nothing more can join"
            )));
        }
        found.total = Self::add_members(&folder, members)?;
        found.touch(now);
        Self::write_group(&folder, &found)
    }

    async fn settle(
        &self,
        group: &str,
        member: &str,
        outcome: &Settled,
        record: Option<(&JobRecord, Duration)>,
    ) -> Result<Option<(Tally, bool)>, Error> {
        if let Some((record, keep)) = record {
            JobStore::put(self, record, keep).await?;
        }
        let folder = self.group_folder(group)?;
        let _guard = locked::lock(&folder)?;
        let now = unix_now();
        let Some(mut found) = Self::read_group(&folder, now)? else {
            return Ok(None);
        };
        Self::complete_last_settle(&folder, &found)?;
        let path = Self::member_path(&folder, member);
        let pending = read(&path)?.is_some_and(|bytes| bytes.is_empty());
        if !pending {
            return Ok(Some((found.tally(), false)));
        }
        // The counts first, with the outcome beside them, then the member's file: a process
        // killed between the two leaves the member counted once, and the next settle (of this
        // member, when its job comes back, or of any other) writes its file.
        if outcome.succeeded() {
            found.succeeded += 1;
        } else {
            found.failed += 1;
        }
        if found.tally().pending() == 0 {
            found.finished = Some(now);
        }
        found.last_settled = Some((member.to_owned(), outcome.clone()));
        found.touch(now);
        Self::write_group(&folder, &found)?;
        locked::replace(&path, outcome.encode()?.as_bytes())?;
        Ok(Some((found.tally(), true)))
    }

    /// Queues the message, then marks it released, under the group's lock: a process killed
    /// between the two (two file operations) leaves it queued and not marked, and the next
    /// release queues it again; the copy of a job already done is not run again.
    async fn release(
        &self,
        group: &str,
        name: &str,
        message: &Message,
        priority: Priority,
    ) -> Result<bool, Error> {
        let (queue, body) = self.encode(message, priority)?;
        let folder = self.group_folder(group)?;
        let _guard = locked::lock(&folder)?;
        let now = unix_now();
        let Some(mut found) = Self::read_group(&folder, now)? else {
            return Err(Error::Group(format!("there is no group {group}")));
        };
        if found.released.iter().any(|n| n == name) {
            return Ok(false);
        }
        self.write_encoded_now(&queue, &body, message.due())?;
        found.released.push(name.to_owned());
        found.released.sort();
        found.touch(now);
        Self::write_group(&folder, &found)?;
        Ok(true)
    }

    async fn mark(&self, group: &str, name: &str, released: bool) -> Result<bool, Error> {
        let folder = self.group_folder(group)?;
        let _guard = locked::lock(&folder)?;
        let now = unix_now();
        let Some(mut found) = Self::read_group(&folder, now)? else {
            return Ok(false);
        };
        if !mark_in(&mut found.released, name, released) {
            return Ok(false);
        }
        Self::write_group(&folder, &found)?;
        Ok(true)
    }

    async fn claim_run(&self, group: &str, name: &str, copy: &str) -> Result<bool, Error> {
        let folder = self.group_folder(group)?;
        let _guard = locked::lock(&folder)?;
        let Some(mut found) = Self::read_group(&folder, unix_now())? else {
            return Ok(true);
        };
        if let Some(claimant) = claimant_in(&found.released, name) {
            return Ok(claimant == copy);
        }
        found.released.push(claim_mark(name, copy));
        Self::write_group(&folder, &found)?;
        Ok(true)
    }

    async fn group(&self, group: &str) -> Result<Option<GroupState>, Error> {
        let folder = self.group_folder(group)?;
        Ok(Self::read_group(&folder, unix_now())?.map(|found| {
            GroupState::new(
                found.spec.clone(),
                found.tally(),
                found.released,
                found.finished,
            )
        }))
    }

    /// Reads every group's `group.json` (groups are few beside jobs).
    async fn groups(&self, request: &GroupRequest) -> Result<GroupPage, Error> {
        let dir = self.jobs_folder().join("groups");
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return GroupPage::of_all(Vec::new(), request);
            }
            Err(e) => return Err(io_error("list", &dir, e)),
        };
        let now = unix_now();
        let mut kept = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error("list", &dir, e))?;
            // A group written wrongly, or removed since the listing, is left out.
            if let Ok(Some(found)) = Self::read_group(&entry.path(), now) {
                let tally = found.tally();
                kept.push(GroupState::new(
                    found.spec,
                    tally,
                    found.released,
                    found.finished,
                ));
            }
        }
        GroupPage::of_all(kept, request)
    }

    async fn outcomes(
        &self,
        group: &str,
        members: &[String],
    ) -> Result<Vec<Option<Settled>>, Error> {
        let folder = self.group_folder(group)?;
        members
            .iter()
            .map(|member| {
                Ok(read(&Self::member_path(&folder, member))?
                    .filter(|bytes| !bytes.is_empty())
                    .and_then(|bytes| Settled::decode(&bytes)))
            })
            .collect()
    }
}
