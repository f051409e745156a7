//! Starts of rates a worker records ahead, a batch at a time, while a rate has ample room: the
//! next runs of the same bounds in this process start without asking the backend, so a rate
//! that does not bind costs one admission per batch instead of one per start. Starts recorded
//! ahead are used within a short time or not at all, and the backend counts each from the end
//! of that time, so no window of the rate's period holds more starts than it allows. One batch
//! per set of bounds is asked for at a time; runs that miss meanwhile are admitted one by one.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::flow::Bound;

/// The most starts asked for at once.
const MOST_AHEAD: u32 = 256;

/// The most sets of bounds with starts kept (limits keyed by customer can make many).
const MOST_KEPT: usize = 10_000;

/// The longest time starts recorded ahead may be used in.
const LONGEST_WITHIN: Duration = Duration::from_millis(100);

/// Starts recorded ahead, not used yet.
#[derive(Debug, Clone, Copy)]
struct Ahead {
    left: u32,
    until: Instant,
}

/// What is kept for one set of bounds.
#[derive(Debug, Default)]
struct Kept {
    /// Batches, earliest first.
    batches: VecDeque<Ahead>,
    /// Whether a batch is being asked for.
    asking: bool,
}

/// Per set of bounds (their names), what is kept.
type ByBounds = HashMap<Vec<String>, Kept>;

/// Per set of bounds, the starts recorded ahead.
#[derive(Debug, Default)]
pub(super) struct StartCache {
    kept: Mutex<ByBounds>,
}

/// An admission to ask for: how many starts, to be used within how long. While it lives, no
/// other batch for its bounds is asked for.
#[derive(Debug)]
pub(super) struct Ask<'a> {
    /// How many starts to ask for.
    pub(super) want: u32,
    /// How long after asking they may be used.
    pub(super) within: Duration,
    /// The cache and the bounds' names, when this ask is the batch in flight.
    batch: Option<(&'a StartCache, Vec<String>)>,
}

impl Drop for Ask<'_> {
    fn drop(&mut self) {
        if let Some((cache, names)) = self.batch.take()
            && let Some(kept) = cache.lock().get_mut(&names)
        {
            kept.asking = false;
        }
    }
}

impl Ask<'_> {
    /// Keeps the starts recorded beyond the one this run uses, to be used before `until`.
    pub(super) fn recorded(&self, recorded: u32, until: Instant) {
        let Some((cache, names)) = &self.batch else {
            return;
        };
        if recorded > 1 {
            cache.keep(names, recorded - 1, until);
        }
    }
}

/// How many starts a batch under `bounds` (rates alone) asks for, and within how long they must
/// be used: a 64th of the smallest rate (1 for rates under 128, never more than 256), within a
/// 10th of the shortest period (at most 100 ms, at least 1 ms).
fn batch_of(bounds: &[Bound]) -> (u32, Duration) {
    let mut want = MOST_AHEAD;
    let mut within = LONGEST_WITHIN;
    for bound in bounds {
        if let Bound::Starts { rate, .. } = bound {
            want = want.min((rate.max() / 64).max(1));
            within = within.min(rate.period() / 10);
        }
    }
    (want, within.max(Duration::from_millis(1)))
}

fn names(bounds: &[Bound]) -> Vec<String> {
    bounds.iter().map(|b| b.name().to_owned()).collect()
}

impl StartCache {
    /// Uses a start recorded ahead under exactly `bounds`, if one is left and still in time.
    pub(super) fn take(&self, bounds: &[Bound]) -> bool {
        let mut kept = self.lock();
        if kept.is_empty() {
            return false;
        }
        let Some(entry) = kept.get_mut(&names(bounds)) else {
            return false;
        };
        let now = Instant::now();
        while let Some(batch) = entry.batches.front_mut() {
            if batch.left > 0 && now < batch.until {
                batch.left -= 1;
                return true;
            }
            entry.batches.pop_front();
        }
        false
    }

    /// What to ask the backend for under `bounds` (rates alone): a batch when none is being
    /// asked for, else one start.
    pub(super) fn ask(&self, bounds: &[Bound]) -> Ask<'_> {
        let (want, within) = batch_of(bounds);
        if want <= 1 {
            return Ask {
                want: 1,
                within,
                batch: None,
            };
        }
        let names = names(bounds);
        let mut kept = self.lock();
        if kept.len() >= MOST_KEPT {
            let now = Instant::now();
            kept.retain(|_, entry| {
                entry
                    .batches
                    .retain(|batch| batch.left > 0 && batch.until > now);
                entry.asking || !entry.batches.is_empty()
            });
            if kept.len() >= MOST_KEPT {
                kept.clear();
            }
        }
        let entry = kept.entry(names.clone()).or_default();
        if entry.asking {
            return Ask {
                want: 1,
                within,
                batch: None,
            };
        }
        entry.asking = true;
        drop(kept);
        Ask {
            want,
            within,
            batch: Some((self, names)),
        }
    }

    /// Keeps `left` starts recorded under the bounds called `names`, to be used before
    /// `until`, after those kept before.
    fn keep(&self, names: &[String], left: u32, until: Instant) {
        let mut kept = self.lock();
        let Some(entry) = kept.get_mut(names) else {
            return;
        };
        entry.batches.retain(|batch| batch.left > 0);
        entry.batches.push_back(Ahead { left, until });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ByBounds> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::Rate;

    fn rate(name: &str, max: u32, period: Duration) -> Bound {
        Bound::Starts {
            name: name.into(),
            rate: Rate::new(max, period),
        }
    }

    #[test]
    fn small_rates_ask_for_one_start_and_large_ones_for_a_batch() {
        let second = Duration::from_secs(1);
        assert_eq!(batch_of(&[rate("a", 10, second)]).0, 1);
        assert_eq!(
            batch_of(&[rate("a", 10_000, Duration::from_millis(100))]),
            (156, Duration::from_millis(10))
        );
        assert_eq!(
            batch_of(&[
                rate("a", 10_000, second),
                rate("b", 1_280, Duration::from_secs(60))
            ]),
            (20, Duration::from_millis(100))
        );
    }

    #[test]
    fn one_batch_is_asked_for_at_a_time_and_its_starts_are_used_once_each_in_time() {
        let cache = StartCache::default();
        let bounds = [rate("a", 10_000, Duration::from_secs(1))];
        assert!(!cache.take(&bounds));
        let first = cache.ask(&bounds);
        assert_eq!(first.want, 156);
        assert_eq!(cache.ask(&bounds).want, 1, "while a batch is asked for");
        first.recorded(3, Instant::now() + Duration::from_secs(5));
        drop(first);
        assert!(cache.take(&bounds));
        assert!(cache.take(&bounds));
        assert!(!cache.take(&bounds));
        assert!(!cache.take(&[rate("b", 10_000, Duration::from_secs(1))]));

        let late = cache.ask(&bounds);
        assert_eq!(late.want, 156, "the batch before is no longer asked for");
        late.recorded(5, Instant::now());
        drop(late);
        assert!(
            !cache.take(&bounds),
            "a start kept past its time is not used"
        );

        let later = Instant::now() + Duration::from_secs(5);
        cache.ask(&bounds).recorded(2, later);
        cache.ask(&bounds).recorded(2, later);
        assert!(
            cache.take(&bounds) && cache.take(&bounds),
            "a batch adds to the one before"
        );
        assert!(!cache.take(&bounds));
    }
}
