//! Per consumed queue, what a session holds of it: enough to tell whether the broker is about
//! to deliver another message of the queue, for priority patience (see `receive`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::lock;

/// How long after an acknowledgement frees a full consumer's slot the broker's next delivery
/// of that queue is expected.
const REFILL_WINDOW: Duration = Duration::from_millis(50);

/// What a session holds of one queue.
#[derive(Debug, Default)]
struct Flow {
    /// Messages delivered and not yet acknowledged.
    unacked: usize,
    /// Set when an acknowledgement freed a slot of a full consumer: until then the broker may
    /// be sending the next message.
    refill_until: Option<Instant>,
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
        file();
    }

    /// Counts a message of `queue` acknowledged (or given back).
    pub(crate) fn settled(&self, queue: &str) {
        if let Some(flow) = lock(&self.flows).get_mut(queue) {
            if flow.unacked >= self.prefetch {
                flow.refill_until = Some(Instant::now() + REFILL_WINDOW);
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

    /// Whether the consumer of `queue` can take another message.
    pub(crate) fn has_room(&self, queue: &str) -> bool {
        lock(&self.flows)
            .get(queue)
            .is_none_or(|f| f.unacked < self.prefetch)
    }
}
