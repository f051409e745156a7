//! What the driver needs from a Redis client library; one adapter per library.

use std::fmt::Debug;
use std::time::Duration;

use hermes_core::{Error, async_trait};

use crate::scripts::Script;

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
}

/// How long one call to Redis may take before it fails with a temporary error, whatever the
/// client library does meanwhile (waits for a reconnection, retries): 5 s. The adapters and the
/// `connect_*` functions keep this bound unless given another.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
