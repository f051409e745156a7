//! What a worker knows of the pauses and cancellations in its backend: read every
//! [`CONTROLS_REFRESH`], and the running messages a cancellation stops.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::flow::{
    CANCELLATIONS_KEPT, CANCELLATIONS_PAGE, CONTROLS_REFRESH, Cancellation, PauseTarget,
};
use crate::time::unix_now;
use crate::{Driver, Priority};

/// How far back each read of the cancellations reaches before the newest one seen, for
/// requests from a process whose clock is behind.
const CLOCK_SLACK: f64 = 60.0;

/// The most pages of cancellations one read takes.
const PAGES_PER_READ: usize = 100;

/// How often a worker lists its driver's queues while a priority is paused, to receive from
/// the others.
const LIST_QUEUES_EVERY: Duration = Duration::from_secs(30);

/// The pauses and cancellations a worker last read, and its running messages.
#[derive(Default)]
pub(super) struct ControlState {
    paused: RwLock<Paused>,
    cancelled: Mutex<Cancelled>,
    /// Per running message id, the token that stops it and how many runs share it.
    running: Mutex<HashMap<String, (CancellationToken, usize)>>,
    /// Woken when the pauses change.
    pub(super) changed: Notify,
}

#[derive(Default)]
struct Paused {
    targets: BTreeSet<PauseTarget>,
    /// Since when each paused type is known to be paused here.
    types_since: HashMap<String, Instant>,
    /// Every priority of the driver's queues, when a priority is paused and the driver can
    /// tell (for receiving from all but the paused ones).
    all_priorities: Option<Vec<Priority>>,
}

#[derive(Default)]
struct Cancelled {
    by_id: HashMap<String, Cancellation>,
    /// The newest request seen.
    newest: f64,
}

/// Which priorities a worker may receive from now.
pub(super) enum Receivable<'a> {
    /// Those it was asked for, none paused.
    Asked(&'a [Priority]),
    /// These: what it was asked for, but the paused ones.
    Only(Vec<Priority>),
    /// Every one it was asked for is paused.
    None,
}

impl ControlState {
    /// Whether the type `message_type` is paused, and for how long this worker has known.
    pub(super) fn type_paused(&self, message_type: &str) -> Option<Duration> {
        let paused = self.paused.read().unwrap_or_else(|e| e.into_inner());
        if paused.types_since.is_empty() {
            return None;
        }
        paused
            .types_since
            .get(message_type)
            .map(|since| since.elapsed())
    }

    /// Whether the queue of `priority` is paused.
    pub(super) fn priority_paused(&self, priority: Priority) -> bool {
        let paused = self.paused.read().unwrap_or_else(|e| e.into_inner());
        paused.targets.contains(&PauseTarget::Priority(priority))
    }

    /// The priorities of `asked` (all when empty) that are not paused.
    pub(super) fn receivable<'a>(&self, asked: &'a [Priority]) -> Receivable<'a> {
        let paused = self.paused.read().unwrap_or_else(|e| e.into_inner());
        let is_paused = |p: &Priority| paused.targets.contains(&PauseTarget::Priority(*p));
        if !paused
            .targets
            .iter()
            .any(|t| matches!(t, PauseTarget::Priority(_)))
        {
            return Receivable::Asked(asked);
        }
        let from: &[Priority] = if asked.is_empty() {
            match &paused.all_priorities {
                Some(all) => all,
                // The driver cannot list its queues: the worker gives back what it gets from
                // a paused one.
                None => return Receivable::Asked(asked),
            }
        } else {
            asked
        };
        let open: Vec<Priority> = from.iter().copied().filter(|p| !is_paused(p)).collect();
        if open.is_empty() {
            Receivable::None
        } else {
            Receivable::Only(open)
        }
    }

    /// The request to cancel `id`, if there is one.
    pub(super) fn cancellation(&self, id: &str) -> Option<Cancellation> {
        let cancelled = self.cancelled.lock().unwrap_or_else(|e| e.into_inner());
        if cancelled.by_id.is_empty() {
            return None;
        }
        cancelled.by_id.get(id).cloned()
    }

    /// Registers a run of the message `id` until the guard drops; its token fires when the
    /// message is cancelled.
    pub(super) fn run(&self, id: &str) -> RunGuard<'_> {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let entry = running
            .entry(id.to_owned())
            .or_insert_with(|| (CancellationToken::new(), 0));
        entry.1 += 1;
        RunGuard {
            state: self,
            id: id.to_owned(),
            token: entry.0.clone(),
        }
    }

    /// Takes in the pauses read from the backend.
    fn set_paused(&self, targets: Vec<PauseTarget>, all_priorities: Option<Vec<Priority>>) {
        let targets: BTreeSet<PauseTarget> = targets.into_iter().collect();
        let mut paused = self.paused.write().unwrap_or_else(|e| e.into_inner());
        if paused.targets == targets {
            if all_priorities.is_some() {
                paused.all_priorities = all_priorities;
            }
            return;
        }
        for target in paused.targets.symmetric_difference(&targets) {
            let on = if targets.contains(target) { 1.0 } else { 0.0 };
            metrics::gauge!(crate::telemetry::PAUSED, "target" => target.to_string()).set(on);
            let verb = if on > 0.0 { "paused" } else { "resumed" };
            tracing::info!("{target} is {verb}");
        }
        let now = Instant::now();
        let mut types_since = std::mem::take(&mut paused.types_since);
        types_since.retain(|t, _| targets.contains(&PauseTarget::Type(t.clone())));
        for target in &targets {
            if let PauseTarget::Type(t) = target {
                types_since.entry(t.clone()).or_insert(now);
            }
        }
        paused.types_since = types_since;
        paused.targets = targets;
        if all_priorities.is_some() {
            paused.all_priorities = all_priorities;
        }
        drop(paused);
        self.changed.notify_waiters();
    }

    /// Takes in cancellations read from the backend, and stops the running messages they name.
    fn add_cancellations(&self, found: Vec<Cancellation>) {
        if found.is_empty() {
            return;
        }
        let mut cancelled = self.cancelled.lock().unwrap_or_else(|e| e.into_inner());
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        for cancellation in found {
            cancelled.newest = cancelled.newest.max(cancellation.at);
            if let Some((token, _)) = running
                .get(&cancellation.id)
                .filter(|(token, _)| !token.is_cancelled())
            {
                tracing::warn!(
                    "Message #{} is cancelled by {} while it runs",
                    cancellation.id,
                    cancellation.by
                );
                token.cancel();
            }
            cancelled
                .by_id
                .insert(cancellation.id.clone(), cancellation);
        }
        let oldest = unix_now() - CANCELLATIONS_KEPT.as_secs_f64();
        cancelled.by_id.retain(|_, c| c.at >= oldest);
    }

    /// Where the next read of the cancellations starts.
    fn read_since(&self) -> f64 {
        let cancelled = self.cancelled.lock().unwrap_or_else(|e| e.into_inner());
        if cancelled.newest == 0.0 {
            0.0
        } else {
            cancelled.newest - CLOCK_SLACK
        }
    }
}

/// One run of a message, registered for cancellation until dropped.
pub(super) struct RunGuard<'a> {
    state: &'a ControlState,
    id: String,
    token: CancellationToken,
}

impl RunGuard<'_> {
    /// Fires when the message is cancelled.
    pub(super) fn token(&self) -> &CancellationToken {
        &self.token
    }
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        let mut running = self.state.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = running.get_mut(&self.id) {
            entry.1 -= 1;
            if entry.1 == 0 {
                running.remove(&self.id);
            }
        }
    }
}

/// Reads the pauses and cancellations of a driver into a worker's state.
#[derive(Default)]
pub(super) struct Reader {
    /// When the driver's queues were last listed.
    listed: Option<Instant>,
    /// Whether the last read failed.
    failing: bool,
}

impl Reader {
    /// Reads the pauses and cancellations of `driver` into `state` once; does nothing on a
    /// driver without controls. A failed read is logged (once until one succeeds) and the
    /// last state kept.
    pub(super) async fn read(&mut self, driver: &dyn Driver, state: &ControlState) {
        let Some(controls) = driver.controls() else {
            return;
        };
        let read = async {
            let paused = controls.paused().await?;
            let any_priority = paused.iter().any(|t| matches!(t, PauseTarget::Priority(_)));
            let list = any_priority
                && self
                    .listed
                    .is_none_or(|at| at.elapsed() > LIST_QUEUES_EVERY);
            let all_priorities = match driver.inspect() {
                Some(inspect) if list => {
                    self.listed = Some(Instant::now());
                    Some(inspect.stats().await?.iter().map(|s| s.priority).collect())
                }
                _ => None,
            };
            // Page on from the newest seen while pages come back full.
            let mut since = state.read_since();
            let mut cancellations = Vec::new();
            for _ in 0..PAGES_PER_READ {
                let page = controls.cancellations(since).await?;
                let full = page.len() >= CANCELLATIONS_PAGE;
                let newest = page.iter().map(|c| c.at).fold(since, f64::max);
                cancellations.extend(page);
                if !full || newest <= since {
                    break;
                }
                since = newest;
            }
            Ok::<_, crate::Error>((paused, all_priorities, cancellations))
        };
        match read.await {
            Ok((paused, all_priorities, cancellations)) => {
                state.set_paused(paused, all_priorities);
                state.add_cancellations(cancellations);
                self.failing = false;
            }
            Err(e) => {
                if !self.failing {
                    tracing::warn!("Reading the pauses and cancellations failed - {e}");
                }
                self.failing = true;
            }
        }
    }

    /// Reads every [`CONTROLS_REFRESH`], the first time after one; never returns. Idle on a
    /// driver without controls.
    pub(super) async fn keep_reading(mut self, driver: &dyn Driver, state: &ControlState) {
        if driver.controls().is_none() {
            return std::future::pending().await;
        }
        loop {
            tokio::time::sleep(CONTROLS_REFRESH).await;
            self.read(driver, state).await;
        }
    }
}
