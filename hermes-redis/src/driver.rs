//! The Redis driver: its public type, its constructors, and the contract it keeps.

use std::sync::Arc;
use std::time::Duration;

use hermes_core::driver::{
    Browse, Capabilities, Controls, Counters, DeadLetters, Delivery, Inspect, JobStore, LimitStore,
    UniqueEmits, Workers, async_trait,
};
use hermes_core::{Driver, Error, Message, Priority, Serializer};

use crate::RedisOptions;
use crate::client::{RedisClient, WakeConnections};
use crate::core::Core;
use crate::naming::Keys;
use crate::url::UrlConfig;
#[cfg(any(feature = "redis-rs", feature = "fred"))]
use crate::url::{Library, Target};

/// Hermes' Redis driver: a set per priority (`hermes` for priority 100), delayed messages in the
/// sorted set `hermes_schedule` scored by their due time. PHP and Rust emitters and workers can
/// share the keys.
///
/// - `send` adds the message to its priority's set (`SADD`), or to the schedule (`ZADD`) when it
///   is due later; the driver also remembers the priority of a delayed message, so it returns
///   to its own set (a message scheduled by a PHP emitter lands in the default set, as in
///   Hermes).
/// - `receive` runs one script: due messages are promoted (atomically: a member moves only for
///   whoever removes it from the schedule), claims older than the visibility timeout are
///   returned, and up to [`RedisOptions::prefetch`] messages are taken, highest priority first.
///   Sets are not ordered: `SPOP` takes a random member, as in Hermes. A message taken before
///   its `execute_at` (put in a set directly) goes to the schedule instead.
/// - At-least-once (the default): a taken message moves into an in-flight sorted set until
///   `ack`; a worker killed mid-handler loses nothing. Every claim has a token of its own, so
///   `ack`, `nack` and `extend` of a claim that expired leave the message's next claim alone.
///   Messages claimed ahead (prefetched) are given back before half the visibility timeout
///   has passed, when no `receive` took them by then. [`DeliveryMode::AtMostOnce`](crate::DeliveryMode::AtMostOnce)
///   keeps Hermes' plain `SPOP`.
/// - Dead letters: a message whose handler failed for good, or that cannot be decoded, is kept
///   beside its queue's set `<set>` in the sorted set `<set>_dead` (ids by time) and the hash
///   `<set>_dead_letters` (reason and body), within [`RedisOptions::retention`].
/// - Inspection: [`Inspect::stats`] counts every state exactly (in flight only with claims, so
///   not in [`DeliveryMode::AtMostOnce`](crate::DeliveryMode::AtMostOnce); messages this
///   process claimed ahead count as waiting), in one script (its cost grows with the claims
///   and with the delayed messages of other priorities than the default); the latency reads
///   the due time of every waiting message of sets up to
///   [`LATENCY_SCAN_LIMIT`](crate::LATENCY_SCAN_LIMIT) members, and is unknown beyond. Peeks,
///   purges of each state and deletes by id read the set with `SSCAN`.
/// - Live workers: each running dispatcher's announcement is a field of the hash
///   `<key>_workers`, renewed while it runs and dropped by a listing once it expired.
/// - Wake-ups ([`RedisOptions::wake_ups`]): a `send` wakes an idle worker of any process, by
///   itself or by a poke sent soon after; a poke still owed when the last handle of the driver
///   is dropped is sent before the drop returns, on a connection of its own (waiting at most
///   1 s), so a process may emit and exit at once. `flush` sends it too.
///
/// Build it on the `redis` crate ([`RedisSetDriver::connect_redis`],
/// [`RedisSetDriver::from_redis`]) or on `fred` ([`RedisSetDriver::connect_fred`],
/// [`RedisSetDriver::from_fred`]); the keys and the behaviour are the same. Lost connections
/// are temporary errors: the client reconnects and the dispatcher waits for it. Clones are
/// cheap and share the connection, the priorities and the messages claimed ahead.
#[derive(Debug, Clone)]
pub struct RedisSetDriver {
    core: Arc<Core>,
}

impl RedisSetDriver {
    /// A driver over any [`RedisClient`].
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for key names that are not letters, digits, `.`, `_`, `-`.
    pub fn new(client: impl RedisClient, options: RedisOptions) -> Result<Self, Error> {
        RedisSetDriver::on(Arc::new(client), options, WakeConnections::default())
    }

    /// A driver on `client`, whose waiting workers wait for wake-ups on connections `wakes`
    /// opens (one of each kind per driver, opened when a worker first waits).
    fn on(
        client: Arc<dyn RedisClient>,
        options: RedisOptions,
        wakes: WakeConnections,
    ) -> Result<Self, Error> {
        let core = Core::new(client, options, wakes)?;
        Ok(RedisSetDriver {
            core: Arc::new(core),
        })
    }

    /// Connects to the queue a URL names, as the `hermes` command and programs that take their
    /// queue from the environment do:
    ///
    /// - `redis://[user:password@]host:port[/db]` (or `rediss://`) for one server;
    /// - `redis+cluster://host:port?hash_tag=T` for a Redis Cluster, found through that node
    ///   (`nodes=host:port,host:port` adds more). A cluster needs `hash_tag`, so that every key
    ///   of the queue lives in one slot.
    /// - `redis+sentinel://[user:password@]host:port[,host:port…]/<master>` for the master
    ///   Redis Sentinel names: the sentinels to ask (port 26379 when left out), then the
    ///   master's name. The URL's credentials are the master's (and its replicas');
    ///   `sentinel_user` and `sentinel_password` are the sentinels', `db` the database. The
    ///   driver follows a failover: a connection that broke is opened again to the master
    ///   the sentinels name then.
    ///
    /// Parameters, all optional, with the defaults of [`RedisOptions`]: `key` (`hermes`),
    /// `schedule_key` (`hermes_schedule`), `hash_tag`, `client` (`redis` for the `redis` crate,
    /// `fred` for `fred`), `delivery` (`at-least-once` or `at-most-once`),
    /// `visibility_timeout` and `refresh_interval` (seconds), `prefetch` (a count),
    /// `deferred_acks`, `wake_ups` and `keyspace_wake_ups` (`true` or `false`), `tls_ca` (the
    /// path of a PEM file of certificate authorities, for `rediss://`), `replica_wait` (how
    /// many replicas must have an emitted message before the emit returns, see
    /// [`RedisOptions::replica_wait`]) and `replica_wait_timeout` (seconds, default 1).
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), hermes_core::Error> {
    /// use hermes_redis::RedisSetDriver;
    ///
    /// let driver = RedisSetDriver::from_url("redis://127.0.0.1:6379/0?key=hermes&client=fred").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] for a URL of another scheme, an unknown parameter, a bad value, a
    /// client library this build leaves out, or a cluster URL without `hash_tag`;
    /// [`Error::InvalidQueueName`] for bad key names; connection errors as `connect_*`. No
    /// error shows the password.
    pub async fn from_url(url: &str) -> Result<Self, Error> {
        let config = UrlConfig::parse(url)?;
        match (config.library, config.target) {
            #[cfg(feature = "redis-rs")]
            (Library::RedisRs, Target::One(url)) => {
                RedisSetDriver::connect_redis(&url, config.options).await
            }
            #[cfg(feature = "redis-rs")]
            (Library::RedisRs, Target::Cluster(nodes)) => {
                let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
                RedisSetDriver::connect_redis_cluster(&nodes, config.options).await
            }
            #[cfg(feature = "fred")]
            (Library::Fred, Target::One(url)) => {
                RedisSetDriver::connect_fred(&url, config.options).await
            }
            #[cfg(feature = "redis-rs")]
            (Library::RedisRs, Target::Sentinel(sentinel)) => {
                RedisSetDriver::connect_redis_sentinel(&sentinel, config.options).await
            }
            #[cfg(feature = "fred")]
            (Library::Fred, Target::Cluster(nodes)) => {
                let url = nodes[0].replacen("redis://", "redis-cluster://", 1);
                RedisSetDriver::connect_fred(&url, config.options).await
            }
            #[cfg(feature = "fred")]
            (Library::Fred, Target::Sentinel(sentinel)) => {
                RedisSetDriver::connect_fred_sentinel(&sentinel, config.options).await
            }
        }
    }

    /// The same queues, on the same connection, with `serializer` instead of
    /// [`JsonSerializer`](hermes_core::JsonSerializer), as a new instance. A PHP process
    /// sharing the queue reads only Hermes' JSON.
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), hermes_core::Error> {
    /// use hermes_core::JsonSerializer;
    /// use hermes_redis::{RedisOptions, RedisSetDriver};
    ///
    /// let driver = RedisSetDriver::connect_redis("redis://127.0.0.1:6379", RedisOptions::default())
    ///     .await?
    ///     .with_serializer(JsonSerializer);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_serializer(self, serializer: impl Serializer) -> Self {
        let core = self
            .core
            .anew(Arc::new(serializer), self.core.wakes.connections());
        RedisSetDriver {
            core: Arc::new(core),
        }
    }

    /// The client, to share with a [`RedisShutdown`](crate::RedisShutdown).
    pub fn client(&self) -> Arc<dyn RedisClient> {
        self.core.client.clone()
    }

    /// The options the driver was built with: its keys, delivery mode and timings.
    pub fn options(&self) -> &RedisOptions {
        &self.core.options
    }

    /// The keys of the dead letters of the queue of `priority`: the sorted set of their ids,
    /// scored by the time they died, and the hash of their records.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`] for a priority without a queue.
    pub fn dead_letter_keys(&self, priority: Priority) -> Result<(String, String), Error> {
        Ok(Keys::dead(&self.core.sets.get(priority)?))
    }
}

#[cfg(feature = "redis-rs")]
impl RedisSetDriver {
    /// Connects to `url` (`redis://host:port/db`) with the `redis` crate, on one multiplexed
    /// connection that is opened again when it breaks, so the driver comes back after Redis
    /// restarts. Connecting, and every call later, takes at most
    /// [`CALL_TIMEOUT`](hermes_core::driver::CALL_TIMEOUT).
    ///
    /// For plain TCP and RESP2 (the default) the driver also keeps a second connection, its
    /// direct lane: a call made while no other call uses the lane is written and answered
    /// there by the calling task itself, without the hand-over to the multiplexed
    /// connection's task, so a single emitter goes at the speed of a bare socket; calls made
    /// meanwhile go on the multiplexed connection, which pipelines them. A lane connection
    /// that Redis closed while idle is replaced before the next call, and then the
    /// multiplexed one too; so are both after a `READONLY` answer (a failover behind the same
    /// address). A call on the lane gives up at its bound or up to a second before it, never
    /// after.
    ///
    /// # Errors
    /// [`Error::Config`] for a bad URL or refused credentials; a temporary error when Redis
    /// cannot be reached.
    pub async fn connect_redis(url: &str, options: RedisOptions) -> Result<Self, Error> {
        let ca = crate::client::connect::read_tls_ca(options.tls_ca.as_deref(), crate::NAME)?;
        let lane = options.replica_wait.is_none();
        let (client, wakes) = Box::pin(crate::client::connect::open_redis(url, ca, lane)).await?;
        RedisSetDriver::on(client, options, wakes)
    }

    /// Connects to a Redis Cluster through any of its `nodes` (`redis://host:port`) with the
    /// `redis` crate. Give [`RedisOptions::hash_tag`] so all keys of the queue share a slot.
    ///
    /// # Errors
    /// [`Error::Config`] for bad URLs, refused credentials or a
    /// [`replica_wait`](RedisOptions::replica_wait); a temporary error when the cluster cannot
    /// be reached.
    pub async fn connect_redis_cluster(
        nodes: &[&str],
        options: RedisOptions,
    ) -> Result<Self, Error> {
        no_replica_wait_on_a_cluster(&options, crate::NAME)?;
        let (client, wakes) = Box::pin(crate::client::connect::open_redis_cluster(nodes)).await?;
        RedisSetDriver::on(client, options, wakes)
    }

    /// Connects to the master `sentinel` names with the `redis` crate, on one multiplexed
    /// connection that is opened again when it breaks, to the master the sentinels name then:
    /// after a failover, the promoted replica. Calls made while no master answers fail with
    /// temporary errors. Connecting, and every call later, takes at most
    /// [`CALL_TIMEOUT`](hermes_core::driver::CALL_TIMEOUT).
    ///
    /// # Errors
    /// [`Error::Config`] for refused credentials; a temporary error when no sentinel answers
    /// or the master they name cannot be reached.
    pub async fn connect_redis_sentinel(
        sentinel: &crate::SentinelConfig,
        options: RedisOptions,
    ) -> Result<Self, Error> {
        let (client, wakes) =
            Box::pin(crate::client::connect::open_redis_sentinel(sentinel)).await?;
        RedisSetDriver::on(client, options, wakes)
    }

    /// A driver on a connection of the `redis` crate that reconnects by itself:
    /// `redis::aio::ConnectionManager` say, or `redis::cluster_async::ClusterConnection`.
    /// ([`connect_redis`](Self::connect_redis) uses a multiplexed connection it opens again when
    /// it breaks, which costs less per command than a `ConnectionManager`.)
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for invalid key names.
    pub fn from_redis<C>(connection: C, options: RedisOptions) -> Result<Self, Error>
    where
        C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
    {
        RedisSetDriver::new(crate::RedisRsClient::new(connection), options)
    }

    /// The same driver, whose idle workers wait for [wake-ups](RedisOptions::wake_ups) on
    /// `connection`, a connection of its own (blocking commands would hold up everything else
    /// on a shared one). The `connect_*` functions and `from_url` open one by themselves.
    #[must_use]
    pub fn with_wake_connection<C>(self, connection: C) -> Self
    where
        C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
    {
        let wakes = WakeConnections {
            listener: Some(crate::client::connect::redis_listener(connection)),
            keyspace: None,
        };
        let core = self.core.anew(self.core.serializer.clone(), wakes);
        RedisSetDriver {
            core: Arc::new(core),
        }
    }
}

#[cfg(feature = "fred")]
impl RedisSetDriver {
    /// Connects to `url` (`redis://host:port/db`, or `redis-cluster://host:port` for a cluster)
    /// with `fred`, with a reconnect policy so that it comes back after Redis restarts.
    /// Connecting, and every call later, takes at most
    /// [`CALL_TIMEOUT`](hermes_core::driver::CALL_TIMEOUT).
    ///
    /// # Errors
    /// [`Error::Config`] for a bad URL or refused credentials; a temporary error when Redis
    /// cannot be reached.
    pub async fn connect_fred(url: &str, options: RedisOptions) -> Result<Self, Error> {
        let ca = crate::client::connect::read_tls_ca(options.tls_ca.as_deref(), crate::FRED_NAME)?;
        let config = fred::types::config::Config::from_url(url).map_err(|e| Error::Config {
            driver: crate::FRED_NAME,
            message: format!("invalid Redis URL: {e}"),
        })?;
        let client = Box::pin(crate::client::connect::open_fred(config, ca)).await?;
        RedisSetDriver::from_fred(client, options)
    }

    /// Connects to the master `sentinel` names with `fred`, which follows a failover by
    /// itself: after a lost connection it asks the sentinels again. Connecting, and every call
    /// later, takes at most [`CALL_TIMEOUT`](hermes_core::driver::CALL_TIMEOUT).
    ///
    /// # Errors
    /// [`Error::Config`] for refused credentials; a temporary error when no sentinel answers
    /// or the master they name cannot be reached.
    pub async fn connect_fred_sentinel(
        sentinel: &crate::SentinelConfig,
        options: RedisOptions,
    ) -> Result<Self, Error> {
        let config = crate::client::connect::fred_sentinel_config(sentinel);
        let client = Box::pin(crate::client::connect::open_fred(config, None)).await?;
        RedisSetDriver::from_fred(client, options)
    }

    /// A driver on a connected `fred` client (standalone or cluster). Its idle workers wait
    /// for [wake-ups](RedisOptions::wake_ups) on a client of their own, with the same
    /// configuration (`clone_new`), connected when a worker first waits.
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for invalid key names.
    pub fn from_fred(client: fred::clients::Client, options: RedisOptions) -> Result<Self, Error> {
        use fred::interfaces::ClientLike;

        if client.is_clustered() {
            no_replica_wait_on_a_cluster(&options, crate::FRED_NAME)?;
        }
        let wakes = crate::client::connect::fred_wake_connections(&client);
        RedisSetDriver::on(Arc::new(crate::FredClient::new(client)), options, wakes)
    }
}

/// Refuses [`RedisOptions::replica_wait`], which a cluster does not offer.
#[cfg(any(feature = "redis-rs", feature = "fred"))]
fn no_replica_wait_on_a_cluster(options: &RedisOptions, driver: &'static str) -> Result<(), Error> {
    if options.replica_wait.is_some() {
        return Err(Error::Config {
            driver,
            message: "replica_wait is not offered on a Redis Cluster".to_owned(),
        });
    }
    Ok(())
}

#[async_trait]
impl Driver for RedisSetDriver {
    fn name(&self) -> &'static str {
        self.core.name()
    }

    fn capabilities(&self) -> Capabilities {
        self.core.capabilities()
    }

    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        self.core.setup_priority_queue(name, priority)
    }

    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        self.core.send(message, priority).await
    }

    /// One round trip for the whole batch: the messages due now go in one `SADD` of all of
    /// them, the delayed ones each in their schedule call, sent together on the connection
    /// (which pipelines them). Every message is checked and encoded before anything is sent.
    ///
    /// # Errors
    /// As [`send`](Driver::send); nothing is sent when a message is refused. On a connection
    /// error any of the messages may have been queued.
    async fn send_batch(&self, messages: &[Message], priority: Priority) -> Result<(), Error> {
        self.core.send_batch(messages, priority).await
    }

    async fn receive(
        &self,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        self.core.receive(priorities, wait).await
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.core.ack(delivery).await
    }

    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.core.nack(delivery).await
    }

    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        self.core.extend(delivery, by).await
    }

    async fn flush(&self) -> Result<(), Error> {
        self.core.flush().await
    }

    fn inspect(&self) -> Option<&dyn Inspect> {
        Some(&*self.core)
    }

    fn browse(&self) -> Option<&dyn Browse> {
        Some(&*self.core)
    }

    fn dead_letters(&self) -> Option<&dyn DeadLetters> {
        Some(&*self.core)
    }

    fn workers(&self) -> Option<&dyn Workers> {
        Some(&*self.core)
    }

    fn unique(&self) -> Option<&dyn UniqueEmits> {
        Some(&*self.core)
    }

    fn limits(&self) -> Option<&dyn LimitStore> {
        Some(&*self.core)
    }

    fn controls(&self) -> Option<&dyn Controls> {
        Some(&*self.core)
    }

    fn jobs(&self) -> Option<&dyn JobStore> {
        Some(&*self.core)
    }

    fn counters(&self) -> Option<&dyn Counters> {
        Some(&*self.core)
    }
}
