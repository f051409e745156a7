//! Priority patience: each priority queue has a consumer of its own, so a `receive` holding
//! only lower-priority deliveries waits a little for a higher-priority message the broker is
//! about to deliver, and messages come out highest priority first.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hermes_core::driver::Delivery;
use hermes_core::{Error, Priority};

use crate::driver::RabbitMqDriver;
use crate::session::Session;
use crate::settle::handed_out;

/// How long a `receive` holding a lower-priority message waits for a higher-priority one the
/// broker is about to deliver.
const HIGHER_PRIORITY_PATIENCE: Duration = Duration::from_millis(250);

/// How often a waiting `receive` looks at the buffer again while a higher-priority message is
/// on its way (an arrival wakes it sooner).
const LOOK_AGAIN: Duration = Duration::from_millis(5);

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
        let mut flows = self.lock();
        let flow = flows.entry(queue.to_owned()).or_default();
        flow.unacked += 1;
        flow.refill_until = None;
        file();
    }

    /// Counts a message of `queue` acknowledged (or given back).
    pub(crate) fn settled(&self, queue: &str) {
        if let Some(flow) = self.lock().get_mut(queue) {
            if flow.unacked >= self.prefetch {
                flow.refill_until = Some(Instant::now() + REFILL_WINDOW);
            }
            flow.unacked = flow.unacked.saturating_sub(1);
        }
    }

    /// Whether the broker may be about to deliver a message of `queue`: an acknowledgement just
    /// freed a slot of its full consumer.
    fn refill_expected(&self, queue: &str) -> bool {
        self.lock()
            .get(queue)
            .and_then(|f| f.refill_until)
            .is_some_and(|until| Instant::now() < until)
    }

    /// Whether the consumer of `queue` can take another message.
    fn has_room(&self, queue: &str) -> bool {
        self.lock()
            .get(queue)
            .is_none_or(|f| f.unacked < self.prefetch)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Flow>> {
        self.flows.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What a look at the buffer found.
// A return value matched at once by the caller: boxing the delivery would cost an allocation
// per message to save a move of a few hundred bytes.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Pick {
    /// The best delivery, or the error of an undecodable body.
    Found(Result<Delivery, Error>),
    /// Only lower-priority messages, while a higher-priority one is on its way.
    HigherComing,
    /// Nothing buffered for the selected queues.
    Nothing,
}

/// The patience of one `receive`: it waits for higher-priority messages for at most
/// [`HIGHER_PRIORITY_PATIENCE`] in all.
#[derive(Debug, Default)]
pub(crate) struct Patience {
    until: Option<tokio::time::Instant>,
}

impl Patience {
    /// Whether the `receive` still waits for higher-priority messages.
    pub(crate) fn lasts(&self) -> bool {
        self.until
            .is_none_or(|until| tokio::time::Instant::now() < until)
    }

    /// Notes a wait for a higher-priority message (the first one starts the patience) and
    /// returns how long to pause before looking again.
    pub(crate) fn wait(&mut self) -> Duration {
        self.until
            .get_or_insert_with(|| tokio::time::Instant::now() + HIGHER_PRIORITY_PATIENCE);
        LOOK_AGAIN
    }
}

impl RabbitMqDriver {
    /// Takes the best buffered delivery of `queues`. When `patient`, a lower-priority message
    /// is not taken while a higher-priority queue has messages its consumer is about to get:
    /// ready ones it has room for, or the one the broker sends after an acknowledgement freed
    /// a slot of its full consumer.
    pub(crate) async fn pick(
        &self,
        session: &Session,
        queues: &[(Priority, String)],
        patient: bool,
    ) -> Result<Pick, Error> {
        let selected: Vec<Priority> = queues.iter().map(|(p, _)| *p).collect();
        let Some(best) = self.inner.buffer.best(&selected) else {
            return Ok(Pick::Nothing);
        };
        if patient {
            for (_, queue) in queues.iter().filter(|(p, _)| *p > best) {
                if session.flows.refill_expected(queue)
                    || (session.flows.has_room(queue) && session.ready(queue).await? > 0)
                {
                    return Ok(Pick::HigherComing);
                }
            }
        }
        // The highest priority buffered now: a message filed since `best` was read (its
        // consumer found full above) is taken instead.
        let Some(item) = self.inner.buffer.take(&selected) else {
            return Ok(Pick::Nothing);
        };
        Ok(Pick::Found(handed_out(item)))
    }
}
