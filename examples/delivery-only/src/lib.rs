//! A driver that only delivers: queues in this process's memory, shared by the instances that
//! name them, with priorities, delays and claims that expire (not extended). It has no facet.
use std::collections::{BTreeMap, HashMap};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use hermes_core::driver::{Capabilities, Delivery, PriorityQueues, Receipt, async_trait};
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, JsonSerializer, Message, Priority, Serializer};
use hermes_core::{driver::validate_queue_name, time::unix_now};

/// A message's place: its queue, when it is visible (Unix µs), and a sequence number. A claim
/// moves its message to the end of the lease, so a claim not settled in time expires by itself.
type Key = (String, i64, u64);

/// Every queue of the process: what instances share.
#[derive(Default)]
struct Store {
    messages: BTreeMap<Key, Vec<u8>>,
    /// Where each claim put its message.
    claims: HashMap<u64, Key>,
    /// Bodies that could not be decoded, with their queue.
    quarantine: Vec<(String, Vec<u8>)>,
    next: u64,
}

impl Store {
    /// Puts `body` on `queue`, visible from `at` (Unix seconds).
    fn put(&mut self, queue: String, at: f64, body: Vec<u8>) -> Key {
        self.next += 1;
        let key = (queue, (at * 1e6) as i64, self.next);
        self.messages.insert(key.clone(), body);
        key
    }
    /// Takes the first message of `queue` visible at `now` (Unix seconds).
    fn pop(&mut self, queue: &str, now: f64) -> Option<(Key, Vec<u8>)> {
        let (first, now) = (i64::MIN, (now * 1e6) as i64);
        let visible = (queue.to_owned(), first, 0)..=(queue.to_owned(), now, u64::MAX);
        let key = self.messages.range(visible).next()?.0.clone();
        self.messages.remove(&key).map(|body| (key, body))
    }
    /// Takes out the message claim `id` still holds (none once another claim took it).
    fn take(&mut self, id: u64) -> Option<(Key, Vec<u8>)> {
        let key = self.claims.remove(&id)?;
        self.messages.remove(&key).map(|body| (key, body))
    }
}

static STORE: LazyLock<Mutex<Store>> = LazyLock::new(Mutex::default);

fn with_store<T>(f: impl FnOnce(&mut Store) -> T) -> T {
    f(&mut STORE.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The queues of this process, at least once: a claim not settled within [`LEASE`] comes back.
#[derive(Debug)]
pub struct ListDriver(PriorityQueues<String>);

/// How long a claim lasts.
pub const LEASE: Duration = Duration::from_secs(1);

impl ListDriver {
    /// A driver whose default queue is `queue`.
    pub fn new(queue: &str) -> Result<Self, Error> {
        validate_queue_name(queue)?;
        let queues = PriorityQueues::with(DEFAULT_PRIORITY, queue.to_owned());
        Ok(ListDriver(queues))
    }

    /// Puts `body` on `queue`, due now, as any producer would.
    pub fn push(queue: &str, body: Vec<u8>) {
        with_store(|s| s.put(queue.to_owned(), unix_now(), body));
    }
    /// Takes the first visible body of `queue`, as any consumer would.
    pub fn pull(queue: &str) -> Option<Vec<u8>> {
        with_store(|s| s.pop(queue, unix_now()).map(|(_, body)| body))
    }
    /// How many bodies of `queue` could not be decoded.
    pub fn quarantined(queue: &str) -> usize {
        with_store(|s| s.quarantine.iter().filter(|(q, _)| q == queue).count())
    }

    /// Claims the first visible message of `priorities`, highest first.
    fn claim(&self, priorities: &[Priority]) -> Result<Option<Delivery>, Error> {
        let now = unix_now();
        with_store(|s| {
            for (priority, queue) in self.0.selected(priorities)? {
                while let Some((_, body)) = s.pop(&queue, now) {
                    let message = JsonSerializer.deserialize(&body).map_err(|source| {
                        let quarantine = queue.clone();
                        s.quarantine.push((queue.clone(), body.clone()));
                        Error::Undecodable { quarantine, source }
                    })?;
                    if !message.is_due_at(now) {
                        s.put(queue.clone(), message.due(), body); // put there ahead of its time
                        continue;
                    }
                    let key = s.put(queue.clone(), now + LEASE.as_secs_f64(), body);
                    s.claims.insert(key.2, key.clone());
                    let delivery = Delivery::new(message, priority, Receipt::new(key.2));
                    return Ok(Some(delivery.with_lease(LEASE)));
                }
            }
            Ok(None)
        })
    }
}

#[async_trait]
impl Driver for ListDriver {
    fn name(&self) -> &'static str {
        "list"
    }
    fn capabilities(&self) -> Capabilities {
        let mut capabilities = Capabilities::all();
        (capabilities.fifo, capabilities.extend) = (false, false);
        capabilities
    }
    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        validate_queue_name(name)?;
        self.0.insert(priority, name.to_owned());
        Ok(())
    }
    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        message.check()?;
        let queue = self.0.get(priority)?;
        let body = JsonSerializer.serialize(message)?;
        with_store(|s| s.put(queue, message.due(), body));
        Ok(())
    }
    async fn receive(&self, p: &[Priority], wait: Duration) -> Result<Option<Delivery>, Error> {
        let give_up = Instant::now() + wait;
        let mut claimed = self.claim(p)?;
        while claimed.is_none() && Instant::now() < give_up {
            tokio::time::sleep(Duration::from_millis(5)).await;
            claimed = self.claim(p)?;
        }
        Ok(claimed)
    }
    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        let id = *delivery.receipt().downcast::<u64>("list")?;
        with_store(|s| s.take(id));
        Ok(())
    }
    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        let id = *delivery.receipt().downcast::<u64>("list")?;
        with_store(|s| s.take(id).map(|(key, body)| s.put(key.0, unix_now(), body)));
        Ok(())
    }
}
