//! What the clones of a [`RedisSetDriver`](crate::RedisSetDriver) share: the client, the
//! options, the keys, the sets by priority, the serializer, the messages claimed ahead, the
//! acknowledgements deferred and the wake-ups; and what a taken message is.

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use hermes_core::driver::{Capabilities, Delivery, PriorityQueues};
use hermes_core::{DEFAULT_PRIORITY, Error, JsonSerializer, Priority, Serializer};

use crate::client::{RedisClient, WakeConnections};
use crate::naming::Keys;
use crate::wake::Wakes;
use crate::{DeliveryMode, RedisOptions};

/// The shared state of one driver and its clones.
#[derive(Debug)]
pub(crate) struct Core {
    pub(crate) client: Arc<dyn RedisClient>,
    pub(crate) options: RedisOptions,
    pub(crate) keys: Keys,
    pub(crate) serializer: Arc<dyn Serializer>,
    pub(crate) sets: PriorityQueues<Arc<str>>,
    /// Messages claimed ahead for this process.
    pub(crate) buffer: Mutex<VecDeque<Taken>>,
    /// One claim script at a time per process.
    pub(crate) fetching: tokio::sync::Mutex<()>,
    /// Claims acknowledged but not yet removed (deferred acknowledgements).
    pub(crate) acked: Mutex<Vec<Vec<u8>>>,
    /// Whether a task will remove the deferred acknowledgements after [`ACK_DELAY`](crate::ACK_DELAY).
    pub(crate) flush_scheduled: AtomicBool,
    /// Whether the task giving back buffered messages at the hold limit runs.
    pub(crate) sweeper: AtomicBool,
    /// Waking idle workers, and being woken.
    pub(crate) wakes: Arc<Wakes>,
}

/// A message taken from a set: its priority and the message as stored, and in at-least-once
/// mode its claim, the member `<priority>:<token>|<message>` of the in-flight set.
#[derive(Debug)]
pub(crate) struct Taken {
    pub(crate) priority: Priority,
    /// The claim member; in at-most-once mode, the message alone.
    member: Vec<u8>,
    /// Where the message starts in `member`.
    body_at: usize,
    pub(crate) claimed: bool,
    /// When it was claimed.
    pub(crate) at: Instant,
}

impl Taken {
    /// A message taken as `member`: its claim (`<priority>:<token>|<message>`) when `claimed`,
    /// else the message itself.
    pub(crate) fn new(priority: Priority, member: Vec<u8>, claimed: bool, at: Instant) -> Self {
        let body_at = if claimed {
            member
                .iter()
                .position(|b| *b == b'|')
                .map_or(0, |bar| bar + 1)
        } else {
            0
        };
        Taken {
            priority,
            member,
            body_at,
            claimed,
            at,
        }
    }

    /// The message as stored.
    pub(crate) fn body(&self) -> &[u8] {
        &self.member[self.body_at..]
    }

    /// The claim member, or nothing when the message was taken without a claim.
    pub(crate) fn claim(&self) -> &[u8] {
        if self.claimed { &self.member } else { &[] }
    }
}

/// A delivered message: what was taken.
#[derive(Debug)]
pub(crate) struct RedisReceipt(pub(crate) Taken);

impl Core {
    /// The state of a new driver on `client`, whose idle workers wait for wake-ups on
    /// connections `wakes` opens (one of each kind per driver, opened when a worker first
    /// waits).
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for key names that are not letters, digits, `.`, `_`, `-`;
    /// [`Error::Config`] for [`RedisOptions::keyspace_wake_ups`] where the driver cannot
    /// subscribe to keyspace events.
    pub(crate) fn new(
        client: Arc<dyn RedisClient>,
        options: RedisOptions,
        wakes: WakeConnections,
    ) -> Result<Self, Error> {
        if options.keyspace_wake_ups && wakes.keyspace.is_none() {
            return Err(Error::Config {
                driver: client.name(),
                message: "keyspace_wake_ups needs one Redis server (keyspace events are not \
                          gathered across a cluster) and a driver that opens its own \
                          connections (connect_redis, connect_fred, from_fred or from_url)"
                    .to_owned(),
            });
        }
        let keys = Keys::new(&options)?;
        let sets = PriorityQueues::with(DEFAULT_PRIORITY, keys.default_set.as_str().into());
        Ok(Core::build(
            client,
            keys,
            options,
            Arc::new(JsonSerializer),
            sets,
            wakes,
        ))
    }

    /// The state of a new instance on the same connection and queues, with `serializer`,
    /// whose idle workers open their connections for wake-ups with `wakes`; it shares nothing
    /// else with this one.
    pub(crate) fn anew(&self, serializer: Arc<dyn Serializer>, wakes: WakeConnections) -> Self {
        Core::build(
            self.client.clone(),
            self.keys.clone(),
            self.options.clone(),
            serializer,
            self.sets.clone(),
            wakes,
        )
    }

    fn build(
        client: Arc<dyn RedisClient>,
        keys: Keys,
        options: RedisOptions,
        serializer: Arc<dyn Serializer>,
        sets: PriorityQueues<Arc<str>>,
        connections: WakeConnections,
    ) -> Self {
        let listener = connections.listener.filter(|_| options.wake_ups);
        let keyspace = connections
            .keyspace
            .filter(|_| options.keyspace_wake_ups)
            .map(|open| {
                let mut watched: Vec<String> =
                    sets.all().into_iter().map(|(_, k)| k.to_string()).collect();
                watched.push(keys.schedule.clone());
                (open, watched)
            });
        let wakes = Wakes::new(
            client.clone(),
            keys.wake.clone(),
            options.refresh_interval,
            listener,
            keyspace,
        );
        Core {
            client,
            keys,
            options,
            serializer,
            sets,
            buffer: Mutex::default(),
            fetching: tokio::sync::Mutex::new(()),
            acked: Mutex::default(),
            flush_scheduled: AtomicBool::new(false),
            sweeper: AtomicBool::new(false),
            wakes: Arc::new(wakes),
        }
    }

    /// The driver's name: the client library's.
    pub(crate) fn name(&self) -> &'static str {
        self.client.name()
    }

    pub(crate) fn capabilities(&self) -> Capabilities {
        let mut capabilities = Capabilities::all();
        capabilities.fifo = false;
        capabilities.at_least_once = self.at_least_once();
        capabilities.extend = self.at_least_once();
        capabilities
    }

    pub(crate) fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        let key = self.keys.set(name)?;
        self.wakes.watch(&key);
        self.sets.insert(priority, key.into());
        Ok(())
    }

    pub(crate) fn at_least_once(&self) -> bool {
        self.options.delivery == DeliveryMode::AtLeastOnce
    }

    /// What `delivery` took, when this driver delivered it.
    pub(crate) fn taken<'a>(&self, delivery: &'a Delivery) -> Result<&'a Taken, Error> {
        let RedisReceipt(taken) = delivery.receipt().downcast::<RedisReceipt>(self.name())?;
        Ok(taken)
    }

    /// The set of `priority`, or the default set when it has none any more.
    pub(crate) fn set_of(&self, priority: Priority) -> Arc<str> {
        self.sets
            .get_or(priority, DEFAULT_PRIORITY)
            .unwrap_or_else(|| self.keys.default_set.as_str().into())
    }

    /// The priorities of the queues other than the default one.
    pub(crate) fn other_priorities(&self) -> impl Iterator<Item = String> {
        self.sets
            .all()
            .into_iter()
            .map(|(p, _)| p)
            .filter(|p| *p != DEFAULT_PRIORITY)
            .map(|p| p.to_string())
    }

    /// The messages claimed ahead, in claim order.
    pub(crate) fn buffer(&self) -> MutexGuard<'_, VecDeque<Taken>> {
        self.buffer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pokes the wake list for idle workers, unless wake-ups are off.
    pub(crate) fn wake_workers(&self) {
        if self.options.wake_ups {
            self.wakes.poke();
        }
    }
}

/// A flag argument of a script: `1` for on, `0` for off.
pub(crate) fn flag(on: bool) -> String {
    if on { "1" } else { "0" }.to_owned()
}
