//! Shared by the Redis driver's tests: the server's address, a raw connection, and the
//! conformance harness for each client library.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use hermes_core::{Error, async_trait};
use hermes_redis::{RedisOptions, RedisSetDriver};
use hermes_testkit::suite::Harness;

/// The Redis the tests use: `HERMES_REDIS_URL`, default `redis://127.0.0.1:6379`.
pub fn redis_url() -> String {
    std::env::var("HERMES_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A plain connection for checking what the driver wrote, as `redis-cli` would.
pub async fn raw() -> Result<redis::aio::MultiplexedConnection, String> {
    let client = redis::Client::open(redis_url()).map_err(|e| e.to_string())?;
    let connect = client.get_multiplexed_async_connection();
    tokio::time::timeout(Duration::from_secs(3), connect)
        .await
        .map_err(|_| format!("no answer from {} within 3 s", redis_url()))?
        .map_err(|e| format!("cannot connect to {}: {e}", redis_url()))
}

/// Runs a command on a raw connection.
pub async fn cmd<T: redis::FromRedisValue>(args: &[&[u8]]) -> T {
    let mut connection = raw().await.expect("Redis is reachable");
    let mut command = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command
        .query_async(&mut connection)
        .await
        .expect("the raw command")
}

/// Options for a test queue called `queue`: its own keys, a 1 s visibility timeout.
pub fn options(queue: &str) -> RedisOptions {
    let mut options = RedisOptions::default();
    options.key = queue.to_owned();
    options.schedule_key = format!("{queue}_schedule");
    options.visibility_timeout = Duration::from_secs(1);
    options.refresh_interval = Duration::from_millis(20);
    options
}

/// Which client library a harness uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Library {
    /// The `redis` crate.
    RedisRs,
    /// `fred`.
    Fred,
}

/// Opens a driver on `queue` with `library`.
pub async fn connect(library: Library, options: RedisOptions) -> Result<RedisSetDriver, Error> {
    match library {
        Library::RedisRs => RedisSetDriver::connect_redis(&redis_url(), options).await,
        Library::Fred => RedisSetDriver::connect_fred(&redis_url(), options).await,
    }
}

/// The conformance harness: each test queue has its own keys on the shared server.
pub struct RedisHarness(pub Library);

#[async_trait]
impl Harness for RedisHarness {
    type Driver = RedisSetDriver;

    async fn available(&self) -> Result<(), String> {
        let mut connection = raw().await?;
        redis::cmd("PING")
            .query_async::<String>(&mut connection)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn open(&self, queue: &str) -> Result<RedisSetDriver, Error> {
        connect(self.0, options(queue)).await
    }

    async fn push_raw(&self, queue: &str, bytes: &[u8]) -> Result<(), Error> {
        cmd::<i64>(&[b"SADD", queue.as_bytes(), bytes]).await;
        Ok(())
    }

    async fn quarantined(&self, queue: &str) -> Result<usize, Error> {
        let key = format!("{queue}_quarantine");
        Ok(cmd::<usize>(&[b"LLEN", key.as_bytes()]).await)
    }

    fn visibility_timeout(&self) -> Duration {
        Duration::from_secs(1)
    }

    async fn cleanup(&self, queue: &str) {
        let pattern = format!("{queue}*");
        let keys: Vec<String> = cmd(&[b"KEYS", pattern.as_bytes()]).await;
        for key in keys {
            cmd::<i64>(&[b"DEL", key.as_bytes()]).await;
        }
    }
}
