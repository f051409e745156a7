//! The transport: what the driver needs from a Redis client library, one adapter per library,
//! and connecting with each.

use std::fmt::Debug;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use hermes_core::Error;
use hermes_core::driver::async_trait;

use crate::scripts::Script;

#[cfg(any(feature = "redis-rs", feature = "fred"))]
pub(crate) mod connect;
#[cfg(feature = "fred")]
mod fred;
#[cfg(feature = "redis-rs")]
mod lane;
#[cfg(feature = "redis-rs")]
mod reconnect;
#[cfg(feature = "redis-rs")]
mod redis_rs;
#[cfg(feature = "redis-rs")]
mod source;

#[cfg(feature = "fred")]
pub use self::fred::FredClient;
#[cfg(feature = "redis-rs")]
pub use redis_rs::RedisRsClient;

/// A reply from Redis, reduced to what the driver reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Nil.
    Nil,
    /// An integer.
    Int(i64),
    /// A string, binary safe.
    Bytes(Vec<u8>),
    /// An array.
    Array(Vec<Reply>),
}

impl Reply {
    /// The bytes of a string reply; the decimal form of an integer.
    pub fn into_bytes(self) -> Option<Vec<u8>> {
        match self {
            Reply::Bytes(b) => Some(b),
            Reply::Int(i) => Some(i.to_string().into_bytes()),
            _ => None,
        }
    }

    /// An integer reply, or a string holding one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(i) => Some(*i),
            Reply::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        }
    }

    /// The elements of an array reply; none for any other.
    pub(crate) fn into_items(self) -> Vec<Reply> {
        match self {
            Reply::Array(items) => items,
            _ => Vec::new(),
        }
    }

    /// A count: a non-negative integer reply, 0 for any other.
    pub(crate) fn count(&self) -> u64 {
        self.as_int()
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or(0)
    }
}

/// A connection to Redis (standalone or cluster) through some client library.
///
/// Implementations reconnect by themselves and map their errors into [`Error`], temporary for
/// lost connections, so the dispatcher waits for Redis to come back.
#[async_trait]
pub trait RedisClient: Debug + Send + Sync + 'static {
    /// The driver name for logs: [`NAME`](crate::NAME) (`redis`) or
    /// [`FRED_NAME`](crate::FRED_NAME) (`redis-fred`).
    fn name(&self) -> &'static str;

    /// Runs `script` with `EVALSHA`, loading it first when the server does not know it.
    async fn eval(&self, script: Script, keys: &[&str], args: &[&[u8]]) -> Result<Reply, Error>;

    /// Runs the command `name` with `args`; the first argument is its key.
    async fn command(&self, name: &'static str, args: &[&[u8]]) -> Result<Reply, Error>;

    /// Runs `write`, then `WAIT replicas timeout` right behind it on the same connection, and
    /// gives the write's reply and how many replicas acknowledged it (all writes before the
    /// `WAIT` on that connection, this one among them) within the timeout.
    ///
    /// The default refuses with [`Error::Unsupported`]: a client whose calls may each go on
    /// another connection cannot tell.
    ///
    /// # Errors
    /// As [`eval`](RedisClient::eval) and [`command`](RedisClient::command); the write may
    /// have been applied when the `WAIT` failed.
    async fn write_then_wait(
        &self,
        write: Write<'_>,
        replicas: u32,
        timeout: std::time::Duration,
    ) -> Result<(Reply, u64), Error> {
        let _ = (write, replicas, timeout);
        Err(Error::Unsupported {
            driver: self.name(),
            what: "waiting for replicas (this client)",
        })
    }
}

/// A write [`RedisClient::write_then_wait`] runs: a script or a command, with the arguments
/// of [`RedisClient::eval`] or [`RedisClient::command`].
#[derive(Clone, Copy)]
pub enum Write<'a> {
    /// `EVALSHA` of the script, with its keys and arguments.
    Script(Script, &'a [&'a str], &'a [&'a [u8]]),
    /// The command, with its arguments (the first is its key).
    Command(&'static str, &'a [&'a [u8]]),
}

impl Debug for Write<'_> {
    /// The script or the command's name: never the arguments, which hold payloads.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Write::Script(script, ..) => f.debug_tuple("Script").field(script).finish(),
            Write::Command(name, _) => f.debug_tuple("Command").field(name).finish(),
        }
    }
}

/// Opens a connection of its own for the blocking command of the wake-ups' listener.
pub(crate) type OpenListener =
    Arc<dyn Fn() -> BoxFuture<'static, Result<Arc<dyn RedisClient>, Error>> + Send + Sync>;

/// Opens a subscription of its own to the keyspace events of the keys given
/// (`__keyspace@<db>__:<key>`), and gives the name of each event (`sadd`, `zadd`, …) as it
/// comes; the stream ends when the subscription is lost.
pub(crate) type OpenKeyspace = Arc<
    dyn Fn(Vec<String>) -> BoxFuture<'static, Result<BoxStream<'static, String>, Error>>
        + Send
        + Sync,
>;

/// How a driver opens connections of its own for wake-ups: the one its idle workers block on
/// (none: they poll), and one subscribed to keyspace events (none: the server's topology has
/// no single place to subscribe, as on a cluster).
#[derive(Clone, Default)]
pub(crate) struct WakeConnections {
    pub(crate) listener: Option<OpenListener>,
    pub(crate) keyspace: Option<OpenKeyspace>,
}
