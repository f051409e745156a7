//! Shared by the Redis driver's tests: the servers' addresses, raw connections, and the
//! conformance harness for each client library, delivery mode and topology.

#![allow(dead_code, unreachable_pub)]

pub mod own_redis;
pub mod sentinel_group;

use std::time::Duration;

use hermes_core::{Error, async_trait};
use hermes_redis::{DeliveryMode, RedisOptions, RedisSetDriver};
use hermes_testkit::suite::Harness;
use redis::aio::ConnectionLike;

/// The Redis the tests use: `HERMES_REDIS_URL`, default `redis://127.0.0.1:6379`.
pub fn redis_url() -> String {
    std::env::var("HERMES_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A node of the test cluster: `HERMES_REDIS_CLUSTER_URL`, default `redis://127.0.0.1:7001`.
pub fn cluster_url() -> String {
    std::env::var("HERMES_REDIS_CLUSTER_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:7001".to_owned())
}

/// A plain connection, as `redis-cli` would use.
pub async fn raw() -> Result<redis::aio::MultiplexedConnection, String> {
    let client = redis::Client::open(redis_url()).map_err(|e| e.to_string())?;
    let connect = client.get_multiplexed_async_connection();
    tokio::time::timeout(Duration::from_secs(3), connect)
        .await
        .map_err(|_| format!("no answer from {} within 3 s", redis_url()))?
        .map_err(|e| format!("cannot connect to {}: {e}", redis_url()))
}

/// A plain connection to the test cluster.
pub async fn raw_cluster() -> Result<redis::cluster_async::ClusterConnection, String> {
    let client =
        redis::cluster::ClusterClient::new(vec![cluster_url()]).map_err(|e| e.to_string())?;
    let connect = client.get_async_connection();
    tokio::time::timeout(Duration::from_secs(3), connect)
        .await
        .map_err(|_| format!("no answer from the cluster at {} within 3 s", cluster_url()))?
        .map_err(|e| format!("cannot connect to the cluster at {}: {e}", cluster_url()))
}

async fn run<T: redis::FromRedisValue>(connection: &mut impl ConnectionLike, args: &[&[u8]]) -> T {
    let mut command = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command
        .query_async(connection)
        .await
        .expect("the raw command")
}

/// Runs a command on a raw connection to the standalone server.
pub async fn cmd<T: redis::FromRedisValue>(args: &[&[u8]]) -> T {
    run(&mut raw().await.expect("Redis is reachable"), args).await
}

/// Which client library, delivery mode and topology a harness uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    pub library: Library,
    pub mode: DeliveryMode,
    pub cluster: bool,
    /// One `ZREM` per acknowledgement instead of deferring them to the next claim.
    pub immediate_acks: bool,
}

/// The client library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Library {
    /// The `redis` crate.
    RedisRs,
    /// `fred`.
    Fred,
}

impl Setup {
    pub const REDIS_RS: Setup = Setup {
        library: Library::RedisRs,
        mode: DeliveryMode::AtLeastOnce,
        cluster: false,
        immediate_acks: false,
    };
    pub const FRED: Setup = Setup {
        library: Library::Fred,
        mode: DeliveryMode::AtLeastOnce,
        cluster: false,
        immediate_acks: false,
    };

    /// Options for a test queue called `queue`: its own keys (in one cluster slot), a 1 s
    /// visibility timeout.
    pub fn options(&self, queue: &str) -> RedisOptions {
        let mut options = RedisOptions::default();
        options.key = queue.to_owned();
        options.schedule_key = format!("{queue}_schedule");
        options.visibility_timeout = Duration::from_secs(1);
        options.refresh_interval = Duration::from_millis(20);
        options.delivery = self.mode;
        options.deferred_acks = !self.immediate_acks;
        if self.cluster {
            options.hash_tag = Some(queue.to_owned());
        }
        options
    }

    /// The key name `name` of the test queue `queue`.
    pub fn key(&self, queue: &str, name: &str) -> String {
        if self.cluster {
            format!("{{{queue}}}{name}")
        } else {
            name.to_owned()
        }
    }

    /// Opens a driver with `options`.
    pub async fn connect(&self, options: RedisOptions) -> Result<RedisSetDriver, Error> {
        match (self.library, self.cluster) {
            (Library::RedisRs, false) => RedisSetDriver::connect_redis(&redis_url(), options).await,
            (Library::RedisRs, true) => {
                RedisSetDriver::connect_redis_cluster(&[&cluster_url()], options).await
            }
            (Library::Fred, false) => RedisSetDriver::connect_fred(&redis_url(), options).await,
            (Library::Fred, true) => {
                let url = cluster_url().replacen("redis://", "redis-cluster://", 1);
                RedisSetDriver::connect_fred(&url, options).await
            }
        }
    }

    /// Runs a raw command on the server or cluster of this setup.
    pub async fn cmd<T: redis::FromRedisValue>(&self, args: &[&[u8]]) -> T {
        if self.cluster {
            run(
                &mut raw_cluster().await.expect("the cluster is reachable"),
                args,
            )
            .await
        } else {
            cmd(args).await
        }
    }
}

/// How many of the dead letters `ids` (the fields of `<set>_dead_letters`) are inputs that
/// could not be decoded.
pub fn undecodable(ids: &[String]) -> usize {
    ids.iter()
        .filter(|id| id.starts_with("undecodable-"))
        .count()
}

/// The conformance harness: each test queue has its own keys on the shared server.
pub struct RedisHarness(pub Setup);

#[async_trait]
impl Harness for RedisHarness {
    type Driver = RedisSetDriver;

    async fn available(&self) -> Result<(), String> {
        if self.0.cluster {
            let mut connection = raw_cluster().await?;
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query_async(&mut connection)
                .await
                .map_err(|e| e.to_string())?;
            return if info.contains("cluster_state:ok") {
                Ok(())
            } else {
                Err(format!("the cluster at {} is not ready", cluster_url()))
            };
        }
        let mut connection = raw().await?;
        redis::cmd("PING")
            .query_async::<String>(&mut connection)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn open(&self, queue: &str) -> Result<RedisSetDriver, Error> {
        self.0.connect(self.0.options(queue)).await
    }

    async fn open_with(
        &self,
        queue: &str,
        serializer: std::sync::Arc<dyn hermes_core::Serializer>,
    ) -> Result<RedisSetDriver, Error> {
        Ok(self.open(queue).await?.with_serializer(serializer))
    }

    async fn push_raw(&self, queue: &str, bytes: &[u8]) -> Result<(), Error> {
        let key = self.0.key(queue, queue);
        self.0.cmd::<i64>(&[b"SADD", key.as_bytes(), bytes]).await;
        Ok(())
    }

    /// `SPOP`, as PHP Hermes takes a message: any member of the default set.
    async fn pull_raw(&self, queue: &str) -> Result<Option<Vec<u8>>, Error> {
        let key = self.0.key(queue, queue);
        Ok(self.0.cmd(&[b"SPOP", key.as_bytes()]).await)
    }

    async fn quarantined(&self, queue: &str) -> Result<usize, Error> {
        let key = self.0.key(queue, &format!("{queue}_dead_letters"));
        let ids: Vec<String> = self.0.cmd(&[b"HKEYS", key.as_bytes()]).await;
        Ok(undecodable(&ids))
    }

    fn visibility_timeout(&self) -> Duration {
        Duration::from_secs(1)
    }

    /// The server is at a fixed address: a copy of the test binary builds the same harness.
    fn environment_of_copies(&self) -> Option<Vec<(String, String)>> {
        Some(Vec::new())
    }

    async fn cleanup(&self, queue: &str) {
        for suffix in [
            "",
            "_schedule",
            "_schedule_priorities",
            "_schedule_by_priority",
            "_in_flight",
            "_dead",
            "_dead_letters",
            "-high",
            "-high_dead",
            "-high_dead_letters",
            "-low",
            "-low_dead",
            "-low_dead_letters",
        ] {
            let key = self.0.key(queue, &format!("{queue}{suffix}"));
            self.0.cmd::<i64>(&[b"DEL", key.as_bytes()]).await;
        }
    }
}
