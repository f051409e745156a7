//! An in-memory driver with every capability: the reference the conformance suite is proven on.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hermes_core::driver::{
    Browse, Capabilities, Controls, Counters, DeadLetters, Delivery, Inspect, JobStore, LimitStore,
    MemoryStore, Receipt, UniqueEmits, Workers, async_trait, validate_queue_name,
};

use hermes_core::inspect::{DeadKind, DeadReason, Retention};
use hermes_core::time::unix_now;
use hermes_core::workers::WorkerInfo;
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, JsonSerializer, Message, Priority, Serializer};
use tokio::sync::Notify;
use tokio::time::Instant;

mod counters;
mod inspect;
mod jobs;
mod unique;
mod workers;

use inspect::Dead;

const NAME: &str = "memory";

/// Options of a [`MemoryDriver`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MemoryOptions {
    /// The name of the default queue (priority [`DEFAULT_PRIORITY`]). Default `hermes`.
    pub queue: String,
    /// How long a claimed message may stay unacknowledged before it is delivered again.
    /// Default 30 s.
    pub visibility_timeout: Duration,
    /// The largest encoded message accepted, in bytes; `None` (the default) for no limit.
    pub max_payload: Option<usize>,
    /// How many dead letters are kept per queue, and how long.
    pub retention: Retention,
}

impl Default for MemoryOptions {
    fn default() -> Self {
        MemoryOptions {
            queue: "hermes".to_owned(),
            visibility_timeout: Duration::from_secs(30),
            max_payload: None,
            retention: Retention::default(),
        }
    }
}

/// A queue in this process's memory, with every capability of [`Capabilities::all`]:
/// priorities, delays, FIFO order per priority, at-least-once delivery with a visibility
/// timeout, lease extension, and a quarantine for undecodable input.
///
/// Messages are stored encoded, as a broker stores them. [`MemoryDriver::reopen`] gives a
/// second, independent handle on the same queues, as a second process would have; dropping a
/// handle with claimed messages leaves them to be delivered again after the visibility timeout.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), hermes_core::Error> {
/// use std::time::Duration;
/// use hermes_core::{Driver, Message, DEFAULT_PRIORITY};
/// use hermes_testkit::MemoryDriver;
///
/// let driver = MemoryDriver::new();
/// driver.setup_priority_queue("hermes_high", 200)?;
/// driver.send(&Message::new("low"), DEFAULT_PRIORITY).await?;
/// driver.send(&Message::new("high"), 200).await?;
/// let first = driver.receive(&[], Duration::from_secs(1)).await?.unwrap();
/// assert_eq!(first.message().message_type(), "high");
/// driver.ack(&first).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MemoryDriver {
    shared: Arc<Shared>,
    serializer: Arc<dyn Serializer>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    notify: Notify,
    options: MemoryOptions,
    /// Limits, pauses and cancellations.
    flow: MemoryStore,
}

#[derive(Debug, Default)]
struct State {
    queues: BTreeMap<Priority, Queue>,
    /// Delayed messages by (due time in microseconds, sequence).
    scheduled: BTreeMap<(i64, u64), Stored>,
    in_flight: HashMap<u64, Lease>,
    /// Lease deadlines, for finding expired claims in order.
    deadlines: BTreeSet<(Instant, u64)>,
    /// Dead letters of every queue, oldest first: failed messages and undecodable bodies.
    dead: VecDeque<Dead>,
    /// Announced workers by id.
    workers: BTreeMap<String, WorkerInfo>,
    /// Uniqueness keys held, by key.
    unique: HashMap<String, HeldKey>,
    /// Job records and groups.
    jobs: jobs::Jobs,
    /// Counters by bucket: until when the bucket is kept, and its counters.
    counters: HashMap<String, (f64, BTreeMap<String, u64>)>,
    sequence: u64,
}

/// A uniqueness key: the id of the message holding it, until when at most.
#[derive(Debug)]
struct HeldKey {
    holder: String,
    until: Instant,
}

#[derive(Debug)]
struct Queue {
    name: String,
    ready: VecDeque<Arc<[u8]>>,
}

#[derive(Debug)]
struct Stored {
    priority: Priority,
    body: Arc<[u8]>,
}

#[derive(Debug)]
struct Lease {
    priority: Priority,
    body: Arc<[u8]>,
    deadline: Instant,
}

/// The receipt of a memory delivery: the lease number.
#[derive(Debug, Clone, Copy)]
struct LeaseId(u64);

impl MemoryDriver {
    /// A driver with a default queue `hermes` and a 30 s visibility timeout.
    pub fn new() -> Self {
        MemoryDriver::with_options(MemoryOptions::default()).expect("the default options are valid")
    }

    /// A driver with `options`.
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for an invalid default queue name.
    pub fn with_options(options: MemoryOptions) -> Result<Self, Error> {
        validate_queue_name(&options.queue)?;
        let mut state = State::default();
        state.queues.insert(
            DEFAULT_PRIORITY,
            Queue {
                name: options.queue.clone(),
                ready: VecDeque::new(),
            },
        );
        Ok(MemoryDriver {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                notify: Notify::new(),
                options,
                flow: MemoryStore::new(),
            }),
            serializer: Arc::new(JsonSerializer),
        })
    }

    /// Uses `serializer` instead of [`JsonSerializer`].
    #[must_use]
    pub fn with_serializer(mut self, serializer: impl Serializer) -> Self {
        self.serializer = Arc::new(serializer);
        self
    }

    /// A second handle on the same queues, as another process would open.
    pub fn reopen(&self) -> Self {
        MemoryDriver {
            shared: self.shared.clone(),
            serializer: self.serializer.clone(),
        }
    }

    /// Puts raw bytes on the queue of `priority`, as a foreign producer could.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`] when no queue is set up for `priority`.
    pub fn push_raw(&self, priority: Priority, bytes: &[u8]) -> Result<(), Error> {
        let mut state = self.lock();
        let queue = state
            .queues
            .get_mut(&priority)
            .ok_or(Error::UnknownPriority(priority))?;
        queue.ready.push_back(Arc::from(bytes));
        drop(state);
        self.shared.notify.notify_waiters();
        Ok(())
    }

    /// Takes the oldest waiting message of the queue of `priority` off it and returns its
    /// bytes as stored, undecoded, as a foreign consumer could; `None` when none is waiting
    /// (delayed and claimed messages are not waiting until they are due or their claim ends).
    ///
    /// # Errors
    /// [`Error::UnknownPriority`] when no queue is set up for `priority`.
    pub fn pull_raw(&self, priority: Priority) -> Result<Option<Vec<u8>>, Error> {
        let mut state = self.lock();
        state.promote_due(unix_now());
        state.expire_leases(Instant::now());
        let queue = state
            .queues
            .get_mut(&priority)
            .ok_or(Error::UnknownPriority(priority))?;
        Ok(queue.ready.pop_front().map(|body| body.to_vec()))
    }

    /// The undecodable inputs moved to the dead letters, oldest first.
    pub fn quarantined(&self) -> Vec<Vec<u8>> {
        self.lock()
            .dead
            .iter()
            .filter(|d| d.message.is_none())
            .map(|d| d.body.to_vec())
            .collect()
    }

    /// The messages waiting or delayed (not the claimed ones), without claiming them: the
    /// waiting ones by priority, highest first, each queue in order, then the delayed ones by
    /// due time. Bodies that do not decode are left out.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), hermes_core::Error> {
    /// use hermes_core::{Driver, Message, DEFAULT_PRIORITY};
    /// use hermes_testkit::MemoryDriver;
    ///
    /// let driver = MemoryDriver::new();
    /// driver.send(&Message::new("ping"), DEFAULT_PRIORITY).await?;
    /// let queued = driver.queued_messages();
    /// assert_eq!(queued[0].0, DEFAULT_PRIORITY);
    /// assert_eq!(queued[0].1.message_type(), "ping");
    /// assert_eq!(driver.len(), 1, "nothing was claimed");
    /// # Ok(()) }
    /// ```
    pub fn queued_messages(&self) -> Vec<(Priority, Message)> {
        let state = self.lock();
        let waiting = state
            .queues
            .iter()
            .rev()
            .flat_map(|(p, q)| q.ready.iter().map(move |body| (*p, body)));
        let delayed = state.scheduled.values().map(|s| (s.priority, &s.body));
        waiting
            .chain(delayed)
            .filter_map(|(p, body)| Some((p, self.serializer.deserialize(body).ok()?)))
            .collect()
    }

    /// The name of the queue of `priority`, when one is set up.
    pub fn queue_name(&self, priority: Priority) -> Option<String> {
        self.lock().queues.get(&priority).map(|q| q.name.clone())
    }

    /// How many messages are stored: waiting, delayed and claimed.
    pub fn len(&self) -> usize {
        let state = self.lock();
        state.queues.values().map(|q| q.ready.len()).sum::<usize>()
            + state.scheduled.len()
            + state.in_flight.len()
    }

    /// Whether no message is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The checked, encoded `message`, within the payload limit.
    fn encode(&self, message: &Message) -> Result<Arc<[u8]>, Error> {
        message.check()?;
        let body: Arc<[u8]> = self.serializer.serialize(message)?.into();
        if let Some(max) = self.shared.options.max_payload
            && body.len() > max
        {
            return Err(Error::PayloadTooLarge {
                driver: NAME,
                size: body.len(),
                max,
            });
        }
        Ok(body)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the first due message of `priorities`, after promoting due delayed messages and
    /// returning expired claims.
    fn try_claim(
        &self,
        state: &mut State,
        priorities: &[Priority],
    ) -> Result<Option<Delivery>, Error> {
        let now = Instant::now();
        state.promote_due(unix_now());
        state.expire_leases(now);
        loop {
            let found = state
                .queues
                .iter_mut()
                .rev()
                .filter(|(p, _)| priorities.is_empty() || priorities.contains(p))
                .find_map(|(p, q)| q.ready.pop_front().map(|body| (*p, body)));
            let Some((priority, body)) = found else {
                return Ok(None);
            };
            return match self.serializer.deserialize(&body) {
                Ok(message) if !message.is_due_at(unix_now()) => {
                    // Put on the queue directly, ahead of its time: it waits like a delayed one.
                    let at = message.due();
                    state.schedule(at, Stored { priority, body });
                    continue;
                }
                Ok(message) => {
                    state.sequence += 1;
                    let id = state.sequence;
                    let deadline = now + self.shared.options.visibility_timeout;
                    state.deadlines.insert((deadline, id));
                    state.in_flight.insert(
                        id,
                        Lease {
                            priority,
                            body,
                            deadline,
                        },
                    );
                    Ok(Some(
                        Delivery::new(message, priority, Receipt::new(LeaseId(id)))
                            .with_lease(self.shared.options.visibility_timeout),
                    ))
                }
                Err(source) => {
                    state.sequence += 1;
                    let dead = Dead {
                        id: format!("undecodable-{}", state.sequence),
                        priority,
                        body,
                        message: None,
                        reason: DeadReason::new(DeadKind::Undecodable, source.to_string()),
                    };
                    state.bury(dead, &self.shared.options.retention);
                    Err(Error::Undecodable {
                        quarantine: "the memory quarantine".to_owned(),
                        source,
                    })
                }
            };
        }
    }
}

impl Default for MemoryDriver {
    fn default() -> Self {
        MemoryDriver::new()
    }
}

impl State {
    /// Queues the encoded `message` on `priority`, or schedules it when it is due later.
    fn put(&mut self, message: &Message, priority: Priority, body: Arc<[u8]>) -> Result<(), Error> {
        if !self.queues.contains_key(&priority) {
            return Err(Error::UnknownPriority(priority));
        }
        match message.execute_at() {
            Some(at) if at > unix_now() => self.schedule(at, Stored { priority, body }),
            _ => {
                if let Some(queue) = self.queues.get_mut(&priority) {
                    queue.ready.push_back(body);
                }
            }
        }
        Ok(())
    }

    /// Keeps `stored` until Unix time `at`.
    fn schedule(&mut self, at: f64, stored: Stored) {
        self.sequence += 1;
        let key = ((at * 1e6) as i64, self.sequence);
        self.scheduled.insert(key, stored);
    }

    fn promote_due(&mut self, now: f64) {
        let now_micros = (now * 1e6) as i64;
        while let Some(entry) = self.scheduled.first_entry() {
            if entry.key().0 > now_micros {
                break;
            }
            let stored = entry.remove();
            if let Some(queue) = self.queues.get_mut(&stored.priority) {
                queue.ready.push_back(stored.body);
            }
        }
    }

    fn expire_leases(&mut self, now: Instant) {
        while let Some(&(deadline, id)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_first();
            if let Some(lease) = self.in_flight.remove(&id) {
                self.give_back(lease);
            }
        }
    }

    fn give_back(&mut self, lease: Lease) {
        if let Some(queue) = self.queues.get_mut(&lease.priority) {
            queue.ready.push_front(lease.body);
        }
    }

    /// When something may become available without a send: the next due time or lease expiry.
    fn next_event(&self) -> Option<Instant> {
        let due = self.scheduled.first_key_value().map(|((micros, _), _)| {
            let secs = (*micros as f64 / 1e6 - unix_now()).max(0.0);
            Instant::now() + Duration::from_secs_f64(secs)
        });
        let lease = self.deadlines.first().map(|(deadline, _)| *deadline);
        match (due, lease) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn check_filter(&self, priorities: &[Priority]) -> Result<(), Error> {
        match priorities.iter().find(|p| !self.queues.contains_key(p)) {
            Some(p) => Err(Error::UnknownPriority(*p)),
            None => Ok(()),
        }
    }
}

#[async_trait]
impl Driver for MemoryDriver {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        let mut capabilities = Capabilities::all();
        capabilities.max_payload = self.shared.options.max_payload;
        capabilities
    }

    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        validate_queue_name(name)?;
        let mut state = self.lock();
        state
            .queues
            .entry(priority)
            .and_modify(|q| q.name = name.to_owned())
            .or_insert_with(|| Queue {
                name: name.to_owned(),
                ready: VecDeque::new(),
            });
        Ok(())
    }

    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        let body = self.encode(message)?;
        let mut state = self.lock();
        state.put(message, priority, body)?;
        drop(state);
        self.shared.notify.notify_waiters();
        Ok(())
    }

    async fn receive(
        &self,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        let give_up = Instant::now() + wait;
        loop {
            let notified = self.shared.notify.notified();
            tokio::pin!(notified);
            let next_event = {
                let mut state = self.lock();
                state.check_filter(priorities)?;
                if let Some(delivery) = self.try_claim(&mut state, priorities)? {
                    return Ok(Some(delivery));
                }
                // Registered before the lock is released, so no send is missed.
                notified.as_mut().enable();
                state.next_event()
            };
            if Instant::now() >= give_up {
                return Ok(None);
            }
            let wake = next_event.map_or(give_up, |at| at.min(give_up));
            tokio::select! {
                () = &mut notified => {},
                () = tokio::time::sleep_until(wake) => {},
            }
        }
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        let LeaseId(id) = *delivery.receipt().downcast::<LeaseId>(NAME)?;
        let mut state = self.lock();
        if let Some(lease) = state.in_flight.remove(&id) {
            state.deadlines.remove(&(lease.deadline, id));
        }
        Ok(())
    }

    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        let LeaseId(id) = *delivery.receipt().downcast::<LeaseId>(NAME)?;
        let mut state = self.lock();
        if let Some(lease) = state.in_flight.remove(&id) {
            state.deadlines.remove(&(lease.deadline, id));
            state.give_back(lease);
        }
        drop(state);
        self.shared.notify.notify_waiters();
        Ok(())
    }

    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        let LeaseId(id) = *delivery.receipt().downcast::<LeaseId>(NAME)?;
        let mut state = self.lock();
        let state = &mut *state;
        let Some(lease) = state.in_flight.get_mut(&id) else {
            return Err(Error::InvalidDelivery(
                "the claim expired before it was extended".to_owned(),
            ));
        };
        state.deadlines.remove(&(lease.deadline, id));
        lease.deadline = Instant::now() + by;
        state.deadlines.insert((lease.deadline, id));
        Ok(())
    }

    fn inspect(&self) -> Option<&dyn Inspect> {
        Some(self)
    }

    fn browse(&self) -> Option<&dyn Browse> {
        Some(self)
    }

    fn dead_letters(&self) -> Option<&dyn DeadLetters> {
        Some(self)
    }

    fn workers(&self) -> Option<&dyn Workers> {
        Some(self)
    }

    fn unique(&self) -> Option<&dyn UniqueEmits> {
        Some(self)
    }

    fn limits(&self) -> Option<&dyn LimitStore> {
        Some(&self.shared.flow)
    }

    fn controls(&self) -> Option<&dyn Controls> {
        Some(&self.shared.flow)
    }

    fn jobs(&self) -> Option<&dyn JobStore> {
        Some(self)
    }

    fn counters(&self) -> Option<&dyn Counters> {
        Some(self)
    }
}
