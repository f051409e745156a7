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
        }
    }
}
