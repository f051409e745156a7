//! Options of the Redis driver.

use std::time::Duration;

use hermes_core::inspect::Retention;

/// When a message leaves Redis for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DeliveryMode {
    /// A claim moves the message into an in-flight set; it is removed on `ack`, and returned to
    /// its queue when the claim is older than the visibility timeout. A worker killed in the
    /// middle of a handler loses nothing. The default.
    #[default]
    AtLeastOnce,
    /// Hermes' own behaviour: `SPOP` removes the message before the handler runs; a worker
    /// that dies in the middle of a handler loses it.
    AtMostOnce,
}

/// Options of a [`RedisSetDriver`](crate::RedisSetDriver). Start from
/// [`RedisOptions::default`] and change fields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RedisOptions {
    /// The set of the default priority. Default `hermes`, as in Hermes.
    pub key: String,
    /// The sorted set of delayed messages, scored by their due time. Default `hermes_schedule`,
    /// as in Hermes.
    pub schedule_key: String,
    /// A hash tag put in front of every key (`{tag}hermes`), so that all keys of the queue live
    /// in one slot of a Redis Cluster. Default none: the plain Hermes key names.
    pub hash_tag: Option<String>,
    /// At-least-once (the default) or Hermes' at-most-once.
    pub delivery: DeliveryMode,
    /// How long a claimed message may stay unacknowledged before it is delivered again.
    /// Default 300 s.
    pub visibility_timeout: Duration,
    /// How long an idle worker waits at most between two looks at the queue. Default 2.5 s.
    ///
    /// With [`wake_ups`](RedisOptions::wake_ups), a worker looks as soon as a Rust emitter
    /// sends a message, or a delayed one is due; this bounds how long a message a PHP emitter
    /// sent waits. Without, it is the polling interval.
    pub refresh_interval: Duration,
    /// Whether emitters wake idle workers, and idle workers wait to be woken (default true).
    ///
    /// A driver pokes the list `<key>_wake` after each send (at most once a millisecond per
    /// process, whatever the rate of sends); a waiting worker blocks on it on a connection of its own,
    /// so it claims a new message about one round trip after it was sent, and sends two
    /// commands per [`refresh_interval`](RedisOptions::refresh_interval) while idle. PHP
    /// Hermes never reads the list. A driver made with
    /// [`from_redis`](crate::RedisSetDriver::from_redis) needs
    /// [`with_wake_connection`](crate::RedisSetDriver::with_wake_connection) for its workers
    /// to be woken; without, they poll every `refresh_interval`.
    pub wake_ups: bool,
    /// Whether idle workers are also woken by the server's keyspace events when a message
    /// lands in one of the queue's sets or in its schedule (default false).
    ///
    /// Emitters that do not poke, PHP Hermes' among them, then wake workers too, about one
    /// round trip after they sent; without, their messages wait up to
    /// [`refresh_interval`](RedisOptions::refresh_interval). The server publishes the events
    /// only when its `notify-keyspace-events` holds `K` and the classes of sets and sorted sets
    /// (`Ksz`, or `KA`): a worker that finds it otherwise warns once and polls. Each worker
    /// keeps a pub/sub connection of its own, and every change of the queue's keys is then
    /// published. One server only (a cluster publishes events on the node of each key).
    pub keyspace_wake_ups: bool,
    /// For `rediss://`: a PEM file of the certificate authorities the server's certificate
    /// must chain to, instead of the system's (a self-signed or private CA). Default none.
    pub tls_ca: Option<std::path::PathBuf>,
    /// How many messages one claim takes at most (at-least-once only); the extra ones wait in
    /// this process, claimed, until a worker asks. Default 16.
    pub prefetch: usize,
    /// Send acknowledgements with the next claim instead of one command each (at-least-once
    /// only). `ack` then returns at once, and the claims are removed with the next `receive`,
    /// or at the latest after [`ACK_DELAY`](crate::ACK_DELAY), or by `flush` when the dispatcher
    /// stops. A worker killed in between runs those messages again after the visibility
    /// timeout, which at-least-once delivery allows. Default true.
    pub deferred_acks: bool,
    /// How many dead letters each queue keeps, and for how long (default 10,000 and 180
    /// days); the oldest go first.
    pub retention: Retention,
    /// Whether an emit waits until replicas have its message before it returns (default
    /// none: it returns once the master has it).
    ///
    /// Redis replicates asynchronously: a master that dies right after it acknowledged a
    /// write may not have passed it on, and the replica promoted in its place (by Sentinel,
    /// say) never had it. With a wait, the emit's write and a `WAIT` go together on one
    /// connection; an emit returns `Ok` only once that many replicas acknowledged the
    /// message, and otherwise fails with a temporary error once the wait's timeout passed
    /// (the message was written, and may be lost in a failover, or may not: retrying may
    /// emit it twice). Delayed messages, retries and unique emits wait too; acknowledgements
    /// and claims do not (a lost one makes a message run again, which at-least-once delivery
    /// allows). Not on a Redis Cluster.
    pub replica_wait: Option<ReplicaWait>,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            key: "hermes".to_owned(),
            schedule_key: "hermes_schedule".to_owned(),
            hash_tag: None,
            delivery: DeliveryMode::AtLeastOnce,
            visibility_timeout: Duration::from_secs(300),
            refresh_interval: Duration::from_millis(2500),
            wake_ups: true,
            keyspace_wake_ups: false,
            tls_ca: None,
            prefetch: 16,
            deferred_acks: true,
            retention: Retention::default(),
            replica_wait: None,
        }
    }
}

/// How [`RedisOptions::replica_wait`] holds an emit until replicas have its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicaWait {
    /// How many replicas must have acknowledged the message (at least 1).
    pub replicas: u32,
    /// How long the server waits for them at most (the timeout of Redis' `WAIT`), shorter
    /// than the driver's call bound [`CALL_TIMEOUT`](hermes_core::driver::CALL_TIMEOUT).
    pub timeout: Duration,
}

impl ReplicaWait {
    /// Waits for `replicas` replicas, at most `timeout`.
    pub fn new(replicas: u32, timeout: Duration) -> Self {
        ReplicaWait { replicas, timeout }
    }
}

/// A master watched by Redis Sentinel: the sentinels to ask, the master's name, and the
/// credentials of the master and of the sentinels. Its `Debug` shows no password.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct SentinelConfig {
    /// The sentinels' addresses, `(host, port)`; any of them that answers names the master.
    pub sentinels: Vec<(String, u16)>,
    /// The master's name in the sentinels' configuration (`sentinel monitor <name> …`).
    pub master: String,
    /// The ACL user of the master and its replicas; none for `default`.
    pub username: Option<String>,
    /// The password of the master and its replicas.
    pub password: Option<String>,
    /// The ACL user of the sentinels.
    pub sentinel_username: Option<String>,
    /// The password of the sentinels (`requirepass` in their configuration), which may
    /// differ from the master's.
    pub sentinel_password: Option<String>,
    /// The database of the master the queue lives in. Default 0.
    pub db: u8,
}

impl SentinelConfig {
    /// The master `master`, found through `sentinels`, without credentials, database 0.
    pub fn new(sentinels: Vec<(String, u16)>, master: impl Into<String>) -> Self {
        SentinelConfig {
            sentinels,
            master: master.into(),
            ..SentinelConfig::default()
        }
    }
}

impl std::fmt::Debug for SentinelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |secret: &Option<String>| secret.as_ref().map(|_| "<hidden>");
        f.debug_struct("SentinelConfig")
            .field("sentinels", &self.sentinels)
            .field("master", &self.master)
            .field("username", &self.username)
            .field("password", &hidden(&self.password))
            .field("sentinel_username", &self.sentinel_username)
            .field("sentinel_password", &hidden(&self.sentinel_password))
            .field("db", &self.db)
            .finish()
    }
}
