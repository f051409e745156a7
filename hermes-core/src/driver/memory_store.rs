//! The flow-control facets in this process's memory.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::{Controls, LimitStore};
use crate::Error;
use crate::flow::{Admission, Bound, CANCELLATIONS_KEPT, Cancellation, PauseTarget};
use crate::time::unix_now;

/// How many admissions pass between two sweeps of every name for expired state.
const SWEEP_EVERY: u32 = 1024;

/// [`LimitStore`] and [`Controls`] in this process's memory: what the in-memory driver keeps,
/// and a store for workers that all run in one process. Workers in other processes do not
/// see it.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Per name, the holders of its slots and when each slot's lease ends.
    slots: HashMap<String, HashMap<String, Instant>>,
    /// Per name, its starts within the longest period asked of it, oldest first.
    starts: HashMap<String, VecDeque<(Instant, Duration)>>,
    paused: BTreeSet<PauseTarget>,
    /// Per message id, the last request to cancel it.
    cancellations: HashMap<String, Cancellation>,
    admissions: u32,
}

impl State {
    /// Drops expired slots and starts of `name`, and the name when nothing is left.
    fn expire(&mut self, name: &str, now: Instant) {
        if let Some(holders) = self.slots.get_mut(name) {
            holders.retain(|_, until| *until > now);
            if holders.is_empty() {
                self.slots.remove(name);
            }
        }
        if let Some(starts) = self.starts.get_mut(name) {
            while starts
                .front()
                .is_some_and(|(at, period)| *at + *period <= now)
            {
                starts.pop_front();
            }
            if starts.is_empty() {
                self.starts.remove(name);
            }
        }
    }

    fn sweep(&mut self, now: Instant) {
        let names: Vec<String> = self
            .slots
            .keys()
            .chain(self.starts.keys())
            .cloned()
            .collect();
        for name in names {
            self.expire(&name, now);
        }
        let oldest = unix_now() - CANCELLATIONS_KEPT.as_secs_f64();
        self.cancellations.retain(|_, c| c.at >= oldest);
    }

    /// Whether `bound` has room now (its state expired first); for a full rate, when a start
    /// leaves the window.
    fn room(&self, bound: &Bound, holder: &str, now: Instant) -> Result<(), Option<Duration>> {
        match bound {
            Bound::Slots { name, max } => {
                let holders = self.slots.get(name);
                let held = holders.map_or(0, HashMap::len);
                let mine = holders.is_some_and(|h| h.contains_key(holder));
                if mine || held < *max as usize {
                    Ok(())
                } else {
                    Err(None)
                }
            }
            Bound::Starts { name, rate } => {
                let within: Vec<Instant> = self
                    .starts
                    .get(name)
                    .into_iter()
                    .flatten()
                    .filter(|(at, _)| *at + rate.period() > now)
                    .map(|(at, _)| *at)
                    .collect();
                if within.len() < rate.max() as usize {
                    Ok(())
                } else {
                    let leaves = within[within.len() - rate.max() as usize] + rate.period();
                    Err(Some(leaves.saturating_duration_since(now)))
                }
            }
        }
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl LimitStore for MemoryStore {
    async fn admit(
        &self,
        holder: &str,
        bounds: &[Bound],
        lease: Duration,
    ) -> Result<Admission, Error> {
        let now = Instant::now();
        let mut state = self.state();
        state.admissions = state.admissions.wrapping_add(1);
        if state.admissions.is_multiple_of(SWEEP_EVERY) {
            state.sweep(now);
        }
        for bound in bounds {
            state.expire(bound.name(), now);
        }
        for bound in bounds {
            if let Err(retry_after) = state.room(bound, holder, now) {
                return Ok(Admission::Refused {
                    name: bound.name().to_owned(),
                    retry_after,
                });
            }
        }
        for bound in bounds {
            match bound {
                Bound::Slots { name, .. } => {
                    state
                        .slots
                        .entry(name.clone())
                        .or_default()
                        .insert(holder.to_owned(), now + lease);
                }
                Bound::Starts { name, rate } => {
                    state
                        .starts
                        .entry(name.clone())
                        .or_default()
                        .push_back((now, rate.period()));
                }
            }
        }
        Ok(Admission::Admitted)
    }

    async fn renew(&self, holder: &str, names: &[String], lease: Duration) -> Result<bool, Error> {
        let now = Instant::now();
        let mut state = self.state();
        let mut all = true;
        for name in names {
            match state
                .slots
                .get_mut(name)
                .and_then(|holders| holders.get_mut(holder))
                .filter(|until| **until > now)
            {
                Some(until) => *until = (*until).max(now + lease),
                None => all = false,
            }
        }
        Ok(all)
    }

    async fn release(&self, holder: &str, names: &[String]) -> Result<(), Error> {
        let now = Instant::now();
        let mut state = self.state();
        for name in names {
            if let Some(holders) = state.slots.get_mut(name) {
                holders.remove(holder);
            }
            state.expire(name, now);
        }
        Ok(())
    }

    async fn usage(&self, bound: &Bound) -> Result<u32, Error> {
        let now = Instant::now();
        let state = self.state();
        let used = match bound {
            Bound::Slots { name, .. } => state
                .slots
                .get(name)
                .map_or(0, |h| h.values().filter(|until| **until > now).count()),
            Bound::Starts { name, rate } => state.starts.get(name).map_or(0, |s| {
                s.iter().filter(|(at, _)| *at + rate.period() > now).count()
            }),
        };
        Ok(u32::try_from(used).unwrap_or(u32::MAX))
    }
}

#[async_trait]
impl Controls for MemoryStore {
    async fn pause(&self, target: &PauseTarget) -> Result<(), Error> {
        self.state().paused.insert(target.clone());
        Ok(())
    }

    async fn resume(&self, target: &PauseTarget) -> Result<bool, Error> {
        Ok(self.state().paused.remove(target))
    }

    async fn paused(&self) -> Result<Vec<PauseTarget>, Error> {
        Ok(self.state().paused.iter().cloned().collect())
    }

    async fn cancel(&self, cancellation: &Cancellation) -> Result<(), Error> {
        self.state()
            .cancellations
            .insert(cancellation.id.clone(), cancellation.clone());
        Ok(())
    }

    async fn cancellations(&self, since: f64) -> Result<Vec<Cancellation>, Error> {
        let oldest = unix_now() - CANCELLATIONS_KEPT.as_secs_f64();
        let mut found: Vec<Cancellation> = self
            .state()
            .cancellations
            .values()
            .filter(|c| c.at >= since && c.at >= oldest)
            .cloned()
            .collect();
        found.sort_by(|a, b| a.at.total_cmp(&b.at));
        Ok(found)
    }
}
