//! Slots of concurrency limits a worker keeps a moment after a run, so the next run of the
//! same bounds in this process takes one without asking the backend: a limit that does not
//! bind then costs next to nothing. A kept slot still counts against its limit in the backend;
//! it is given up once idle for [`KEEP_IDLE`], so other processes get it soon after.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::driver::LimitStore;

/// How long a slot is kept after its run, for the next run of its bounds here.
pub(super) const KEEP_IDLE: Duration = Duration::from_millis(20);

/// The slots of concurrency limits one run holds.
#[derive(Debug)]
pub(super) struct Slots {
    /// Who holds them in the backend.
    pub(super) holder: String,
    /// The bounds held.
    pub(super) names: Vec<String>,
    /// Until when the backend holds them at least.
    pub(super) until: Instant,
}

/// Per set of bounds, the slots kept and since when each is idle.
type Idle = HashMap<Vec<String>, Vec<(Slots, Instant)>>;

/// Idle slots, by the bounds they hold.
#[derive(Debug, Default)]
pub(super) struct SlotCache {
    idle: Mutex<Idle>,
}

impl SlotCache {
    /// An idle slot of exactly `names` whose hold lasts at least `lease / 2` more, if any.
    pub(super) fn take(&self, names: &[String], lease: Duration) -> Option<Slots> {
        let mut idle = self.lock();
        let kept = idle.get_mut(names)?;
        let now = Instant::now();
        let found = kept
            .iter()
            .position(|(slots, _)| slots.until > now + lease / 2)?;
        Some(kept.swap_remove(found).0)
    }

    /// Keeps `slots` after their run.
    pub(super) fn put(&self, slots: Slots) {
        self.lock()
            .entry(slots.names.clone())
            .or_default()
            .push((slots, Instant::now()));
    }

    /// Gives up, in `store`, the slots idle for [`KEEP_IDLE`] or longer, or all of them.
    pub(super) async fn release_idle(&self, store: &dyn LimitStore, all: bool) {
        let now = Instant::now();
        let mut gone = Vec::new();
        {
            let mut idle = self.lock();
            for kept in idle.values_mut() {
                let mut i = 0;
                while i < kept.len() {
                    if all || now.duration_since(kept[i].1) >= KEEP_IDLE {
                        gone.push(kept.swap_remove(i).0);
                    } else {
                        i += 1;
                    }
                }
            }
            idle.retain(|_, kept| !kept.is_empty());
        }
        for slots in gone {
            if let Err(e) = store.release(&slots.holder, &slots.names).await {
                tracing::warn!(
                    "Giving up the limit slots of {} failed, they expire with their lease - {e}",
                    slots.holder
                );
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Idle> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }
}
