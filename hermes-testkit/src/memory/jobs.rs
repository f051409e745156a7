//! The memory driver's job records and groups, under the same lock as the queues, so a group
//! releases a message and marks it sent in one step.

use std::collections::HashMap;
use std::time::Duration;

use hermes_core::driver::{
    JobStore, UNFINISHED_GROUP_KEPT, async_trait, claim_mark, claimant_in, mark_in,
};
use hermes_core::time::unix_now;
use hermes_core::tracking::{
    GroupPage, GroupRequest, GroupSpec, GroupState, JobRecord, RecordPage, RecordRequest, Settled,
    Tally, after_listing_cursor, listing_cursor, parse_listing_cursor,
};
use hermes_core::{Error, Message, Priority};
use tokio::time::Instant;

use super::MemoryDriver;

/// How many writes pass between two sweeps of expired records and groups.
const SWEEP_EVERY: u32 = 1024;

/// Records and groups, with when each expires.
#[derive(Debug, Default)]
pub(super) struct Jobs {
    /// Per id, the record, when it expires, and when that is in Unix seconds (its order).
    records: HashMap<String, (JobRecord, Instant, f64)>,
    groups: HashMap<String, Group>,
    writes: u32,
}

#[derive(Debug)]
struct Group {
    spec: GroupSpec,
    members: HashMap<String, Option<Settled>>,
    tally: Tally,
    released: Vec<String>,
    finished: Option<f64>,
    keep: Duration,
    expires: Instant,
}

impl Group {
    fn touch(&mut self) {
        let kept = if self.finished.is_some() {
            self.keep
        } else {
            UNFINISHED_GROUP_KEPT
        };
        self.expires = Instant::now() + kept;
    }
}

impl Jobs {
    fn wrote(&mut self) {
        self.writes = self.writes.wrapping_add(1);
        if self.writes.is_multiple_of(SWEEP_EVERY) {
            let now = Instant::now();
            self.records.retain(|_, (_, until, _)| *until > now);
            self.groups.retain(|_, group| group.expires > now);
        }
    }

    fn store(&mut self, record: &JobRecord, keep: Duration) {
        let expires = unix_now() + keep.as_secs_f64();
        self.records.insert(
            record.id.clone(),
            (record.clone(), Instant::now() + keep, expires),
        );
        self.wrote();
    }

    fn group(&mut self, id: &str) -> Option<&mut Group> {
        let now = Instant::now();
        if self.groups.get(id).is_some_and(|g| g.expires <= now) {
            self.groups.remove(id);
        }
        self.groups.get_mut(id)
    }
}

#[async_trait]
impl JobStore for MemoryDriver {
    async fn put(&self, record: &JobRecord, keep: Duration) -> Result<(), Error> {
        self.lock().jobs.store(record, keep);
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<JobRecord>, Error> {
        let state = self.lock();
        Ok(state
            .jobs
            .records
            .get(id)
            .filter(|(_, until, _)| *until > Instant::now())
            .map(|(record, _, _)| record.clone()))
    }

    async fn records(&self, request: &RecordRequest) -> Result<RecordPage, Error> {
        let cursor = match request.cursor.as_deref() {
            Some(cursor) => Some(parse_listing_cursor(cursor).ok_or_else(|| {
                Error::InvalidMessage("not a cursor of the memory driver's records".to_owned())
            })?),
            None => None,
        };
        let state = self.lock();
        let now = Instant::now();
        let mut kept: Vec<(f64, &str, &JobRecord)> = state
            .jobs
            .records
            .iter()
            .filter(|(id, (_, until, expires))| {
                *until > now && after_listing_cursor(cursor, *expires, id)
            })
            .map(|(id, (record, _, expires))| (*expires, id.as_str(), record))
            .collect();
        kept.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| b.1.cmp(a.1)));
        let reads = request.reads();
        let more = kept.len() > reads;
        let read = kept
            .into_iter()
            .take(reads)
            .map(|(expires, id, record)| (listing_cursor(expires, id), Some(record.clone())))
            .collect();
        Ok(request.page_of(read, more))
    }

    async fn open(
        &self,
        spec: &GroupSpec,
        members: &[String],
        keep: Duration,
    ) -> Result<(), Error> {
        let mut state = self.lock();
        let jobs = &mut state.jobs;
        if jobs.group(&spec.id).is_some() {
            return Ok(());
        }
        let mut group = Group {
            spec: spec.clone(),
            members: members.iter().map(|m| (m.clone(), None)).collect(),
            tally: Tally::new(0, 0, 0),
            released: Vec::new(),
            finished: None,
            keep,
            expires: Instant::now(),
        };
        group.tally.total = group.members.len() as u64;
        group.touch();
        jobs.groups.insert(spec.id.clone(), group);
        jobs.wrote();
        Ok(())
    }

    async fn join(&self, group: &str, members: &[String]) -> Result<(), Error> {
        let mut state = self.lock();
        let Some(found) = state.jobs.group(group) else {
            return Err(Error::Group(format!("there is no group {group}")));
        };
        if found.finished.is_some() {
            return Err(Error::Group(format!(
                "group {group} is finished: every member is done, nothing more can join"
            )));
        }
        for member in members {
            if !found.members.contains_key(member) {
                found.members.insert(member.clone(), None);
                found.tally.total += 1;
            }
        }
        found.touch();
        Ok(())
    }

    async fn settle(
        &self,
        group: &str,
        member: &str,
        outcome: &Settled,
        record: Option<(&JobRecord, Duration)>,
    ) -> Result<Option<(Tally, bool)>, Error> {
        let mut state = self.lock();
        let jobs = &mut state.jobs;
        if let Some((record, keep)) = record {
            jobs.store(record, keep);
        }
        let Some(found) = jobs.group(group) else {
            return Ok(None);
        };
        let counted = match found.members.get_mut(member) {
            Some(slot @ None) => {
                *slot = Some(outcome.clone());
                if outcome.succeeded() {
                    found.tally.succeeded += 1;
                } else {
                    found.tally.failed += 1;
                }
                if found.tally.pending() == 0 {
                    found.finished = Some(unix_now());
                }
                found.touch();
                true
            }
            _ => false,
        };
        Ok(Some((found.tally, counted)))
    }

    async fn release(
        &self,
        group: &str,
        name: &str,
        message: &Message,
        priority: Priority,
    ) -> Result<bool, Error> {
        let body = self.encode(message)?;
        let mut state = self.lock();
        let Some(found) = state.jobs.group(group) else {
            return Err(Error::Group(format!("there is no group {group}")));
        };
        if found.released.iter().any(|n| n == name) {
            return Ok(false);
        }
        found.released.push(name.to_owned());
        if let Err(e) = state.put(message, priority, body) {
            if let Some(found) = state.jobs.group(group) {
                found.released.retain(|n| n != name);
            }
            return Err(e);
        }
        drop(state);
        self.shared.notify.notify_waiters();
        Ok(true)
    }

    async fn mark(&self, group: &str, name: &str, released: bool) -> Result<bool, Error> {
        let mut state = self.lock();
        let Some(found) = state.jobs.group(group) else {
            return Ok(false);
        };
        Ok(mark_in(&mut found.released, name, released))
    }

    async fn claim_run(&self, group: &str, name: &str, copy: &str) -> Result<bool, Error> {
        let mut state = self.lock();
        let Some(found) = state.jobs.group(group) else {
            return Ok(true);
        };
        if let Some(claimant) = claimant_in(&found.released, name) {
            return Ok(claimant == copy);
        }
        found.released.push(claim_mark(name, copy));
        Ok(true)
    }

    async fn group(&self, group: &str) -> Result<Option<GroupState>, Error> {
        let mut state = self.lock();
        Ok(state.jobs.group(group).map(|found| {
            GroupState::new(
                found.spec.clone(),
                found.tally,
                found.released.clone(),
                found.finished,
            )
        }))
    }

    async fn groups(&self, request: &GroupRequest) -> Result<GroupPage, Error> {
        let state = self.lock();
        let now = Instant::now();
        let kept = state
            .jobs
            .groups
            .values()
            .filter(|g| g.expires > now)
            .map(|g| GroupState::new(g.spec.clone(), g.tally, g.released.clone(), g.finished))
            .collect();
        GroupPage::of_all(kept, request)
    }

    async fn outcomes(
        &self,
        group: &str,
        members: &[String],
    ) -> Result<Vec<Option<Settled>>, Error> {
        let mut state = self.lock();
        let found = state.jobs.group(group);
        Ok(members
            .iter()
            .map(|member| {
                found
                    .as_ref()
                    .and_then(|g| g.members.get(member).cloned().flatten())
            })
            .collect())
    }
}
