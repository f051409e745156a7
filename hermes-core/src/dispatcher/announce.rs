//! The worker's announcement: who it is and what it runs, renewed in the backend until it
//! stops.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::time::unix_now;
use crate::workers::{RunningMessage, ScheduledEntry, WorkerInfo};
use crate::{Driver, Message, Scheduler};

/// The messages a dispatcher handles now.
#[derive(Default)]
pub(super) struct Running {
    next: AtomicU64,
    now: Mutex<HashMap<u64, RunningMessage>>,
    handled: AtomicU64,
    failed: AtomicU64,
}

impl Running {
    /// Counts `message` as running until the guard drops.
    pub(super) fn start(&self, message: &Message) -> RunningGuard<'_> {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let entry = RunningMessage::new(message.id(), message.message_type(), unix_now());
        self.lock().insert(key, entry);
        RunningGuard { running: self, key }
    }

    /// Counts a message whose handlers finished, `failed` or not.
    pub(super) fn finished(&self, failed: bool) {
        self.handled.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, RunningMessage>> {
        self.now.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn snapshot(&self) -> Vec<RunningMessage> {
        let mut running: Vec<RunningMessage> = self.lock().values().cloned().collect();
        running.sort_by(|a, b| a.since.total_cmp(&b.since));
        running
    }
}

/// One running message, until dropped.
pub(super) struct RunningGuard<'a> {
    running: &'a Running,
    key: u64,
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        self.running.lock().remove(&self.key);
    }
}

/// Announces the worker every third of `ttl`, with what it runs then; never returns. A failed
/// announcement is logged and tried again at the next beat. Idle on a driver without live
/// workers.
pub(super) async fn keep_announced(
    driver: &dyn Driver,
    running: &Running,
    schedulers: &[Scheduler],
    mut info: WorkerInfo,
    ttl: Duration,
) {
    let Some(workers) = driver.workers() else {
        return std::future::pending().await;
    };
    loop {
        info.running = running.snapshot();
        info.busy = info.running.len();
        info.handled = running.handled.load(Ordering::Relaxed);
        info.failed = running.failed.load(Ordering::Relaxed);
        info.schedules = schedulers
            .iter()
            .flat_map(Scheduler::status)
            .map(|status| ScheduledEntry::from(&status))
            .collect();
        if let Err(e) = workers.announce(&info, ttl).await {
            tracing::warn!("Announcing worker {} failed - {e}", info.id);
        }
        tokio::time::sleep(ttl / 3).await;
    }
}
