//! Per consumed queue, what a session holds of it: enough to tell whether the broker is about
//! to deliver another message of the queue, for priority patience (see `receive`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::lock;

/// How long after an acknowledgement frees a full consumer's slot the broker's next delivery
/// of that queue is expected at least: the window widens (up to [`LONGEST_REFILL_WINDOW`]) to
/// twice the refills seen lately when a loaded broker or machine takes longer, and narrows again
/// when they are quick.
const REFILL_WINDOW: Duration = Duration::from_millis(50);

/// The widest refill window: a `receive`'s patience for higher-priority messages ends sooner.
const LONGEST_REFILL_WINDOW: Duration = Duration::from_millis(250);

/// A delivery later than this after a freed slot is taken for a new message, not a refill, and
/// leaves the window as it is.
const REFILL_SEEN_WITHIN: Duration = Duration::from_secs(1);

/// What a session holds of one queue.
#[derive(Debug)]
struct Flow {
    /// Messages delivered and not yet acknowledged.
    unacked: usize,
    /// Set when an acknowledgement freed a slot of a full consumer: until then the broker may
    /// be sending the next message.
    refill_until: Option<Instant>,
    /// When the first acknowledgement since the last delivery freed a slot of a full consumer.
    freed_at: Option<Instant>,
    /// How long a refill is expected after a freed slot.
    window: Duration,
    /// Whether a `receive` already looked once more for an overdue refill (see
    /// [`Flows::look_again_for_refill`]).
    looked_again: bool,
}

impl Default for Flow {
    fn default() -> Self {
        Flow {
            unacked: 0,
            refill_until: None,
            freed_at: None,
            window: REFILL_WINDOW,
            looked_again: false,
        }
    }
}

impl Flow {
    /// Learns from a delivery how long refills take: a refill that took `t` widens the window
    /// to `2t`; quick ones narrow it by a quarter each.
    fn learn_refill(&mut self, now: Instant) {
        let Some(freed_at) = self.freed_at.take() else {
            return;
        };
        let took = now.saturating_duration_since(freed_at);
        if took < REFILL_SEEN_WITHIN {
            self.window = (took * 2)
                .max(self.window * 3 / 4)
                .clamp(REFILL_WINDOW, LONGEST_REFILL_WINDOW);
        }
    }
}

/// Per consumed queue, what a session holds of it: enough to tell whether the broker is about
/// to deliver another message of the queue.
#[derive(Debug)]
pub(crate) struct Flows {
    /// The prefetch of each consumer.
    prefetch: usize,
    flows: Mutex<HashMap<String, Flow>>,
}

impl Flows {
    /// No messages held, for consumers with a prefetch of `prefetch`.
    pub(crate) fn new(prefetch: usize) -> Self {
        Flows {
            prefetch,
            flows: Mutex::default(),
        }
    }

    /// Counts a message of `queue` delivered to this session, and files it with `file` before
    /// the count shows: a `receive` that finds the queue's consumer full finds the message
    /// filed, and the message's acknowledgement comes after the count.
    pub(crate) fn delivered(&self, queue: &str, file: impl FnOnce()) {
        let mut flows = lock(&self.flows);
        let flow = flows.entry(queue.to_owned()).or_default();
        flow.unacked += 1;
        flow.refill_until = None;
        flow.looked_again = false;
        flow.learn_refill(Instant::now());
        file();
    }

    /// Counts a message of `queue` acknowledged (or given back).
    pub(crate) fn settled(&self, queue: &str) {
        if let Some(flow) = lock(&self.flows).get_mut(queue) {
            if flow.unacked >= self.prefetch {
                let now = Instant::now();
                flow.freed_at.get_or_insert(now);
                flow.refill_until = Some(now + flow.window);
                flow.looked_again = false;
            }
            flow.unacked = flow.unacked.saturating_sub(1);
        }
    }

    /// Whether the broker may be about to deliver a message of `queue`: an acknowledgement just
    /// freed a slot of its full consumer.
    pub(crate) fn refill_expected(&self, queue: &str) -> bool {
        lock(&self.flows)
            .get(queue)
            .and_then(|f| f.refill_until)
            .is_some_and(|until| Instant::now() < until)
    }

    /// Whether a `receive` that found no ready message of `queue` after its refill window
    /// should look at the buffer once more: a slot freed lately is still unfilled, and the
    /// broker may have sent the message already while it is not filed yet. `true` once per
    /// freed slot.
    pub(crate) fn look_again_for_refill(&self, queue: &str) -> bool {
        let mut flows = lock(&self.flows);
        let Some(flow) = flows.get_mut(queue) else {
            return false;
        };
        let overdue = flow
            .freed_at
            .is_some_and(|freed_at| freed_at.elapsed() < LONGEST_REFILL_WINDOW);
        let look = overdue && !flow.looked_again;
        flow.looked_again |= look;
        look
    }

    /// Whether the consumer of `queue` can take another message.
    pub(crate) fn has_room(&self, queue: &str) -> bool {
        lock(&self.flows)
            .get(queue)
            .is_none_or(|f| f.unacked < self.prefetch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(flows: &Flows, queue: &str) -> Duration {
        lock(&flows.flows)[queue].window
    }

    /// A full consumer of prefetch 1 acknowledged, then refilled after `took`.
    fn refill(flows: &Flows, queue: &str, took: Duration) {
        flows.settled(queue);
        let mut all = lock(&flows.flows);
        let flow = all.get_mut(queue).expect("a flow");
        let freed_at = flow.freed_at.expect("a freed slot");
        flow.learn_refill(freed_at + took);
        flow.unacked += 1;
    }

    #[test]
    fn slow_refills_widen_the_window_and_quick_ones_narrow_it() {
        let flows = Flows::new(1);
        flows.delivered("q", || {});
        assert_eq!(window(&flows, "q"), REFILL_WINDOW);

        refill(&flows, "q", Duration::from_millis(90));
        assert_eq!(window(&flows, "q"), Duration::from_millis(180));
        refill(&flows, "q", Duration::from_millis(400));
        assert_eq!(window(&flows, "q"), LONGEST_REFILL_WINDOW);
        // A delivery long after the freed slot is a new message: the window stays.
        refill(&flows, "q", Duration::from_secs(5));
        assert_eq!(window(&flows, "q"), LONGEST_REFILL_WINDOW);

        for _ in 0..10 {
            refill(&flows, "q", Duration::from_millis(2));
        }
        assert_eq!(window(&flows, "q"), REFILL_WINDOW);
    }

    #[test]
    fn a_freed_slot_of_a_full_consumer_expects_a_refill_for_the_window() {
        let flows = Flows::new(1);
        flows.delivered("q", || {});
        assert!(!flows.refill_expected("q"));
        assert!(!flows.has_room("q"));
        flows.settled("q");
        assert!(flows.refill_expected("q"));
        assert!(flows.has_room("q"));
        flows.delivered("q", || {});
        assert!(!flows.refill_expected("q"));
    }

    #[test]
    fn an_overdue_refill_is_looked_for_once_per_freed_slot() {
        let flows = Flows::new(1);
        assert!(!flows.look_again_for_refill("q"), "nothing consumed");
        flows.delivered("q", || {});
        assert!(!flows.look_again_for_refill("q"), "no slot freed");
        flows.settled("q");
        assert!(flows.look_again_for_refill("q"));
        assert!(!flows.look_again_for_refill("q"), "once");
        flows.delivered("q", || {});
        flows.settled("q");
        assert!(flows.look_again_for_refill("q"), "a new freed slot");
    }
}
