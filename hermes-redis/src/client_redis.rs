//! The adapter for the `redis` crate: a connection that reconnects by itself, or a cluster
//! connection.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use hermes_core::{Error, async_trait};
use redis::Value;
use redis::aio::ConnectionLike;

use crate::NAME;
use crate::client::{COMMAND_TIMEOUT, RedisClient, Reply};
use crate::error::{bounded, redis_error};
use crate::scripts::Script;

/// A connection of the `redis` crate that reconnects by itself and can be cloned cheaply:
/// `redis::aio::ConnectionManager` say, or `redis::cluster_async::ClusterConnection`.
/// (`connect_redis` uses a multiplexed connection it opens again when it breaks, which costs
/// less per command than a `ConnectionManager`.)
///
/// Every call returns within [`COMMAND_TIMEOUT`] (or the bound given to
/// [`with_timeout`](RedisRsClient::with_timeout)), with a temporary error when Redis did not
/// answer in time.
pub struct RedisRsClient<C> {
    connection: C,
    scripts: HashMap<Script, redis::Script>,
    timeout: Duration,
}

impl<C> RedisRsClient<C> {
    /// Wraps `connection`.
    pub fn new(connection: C) -> Self {
        let scripts = Script::ALL
            .iter()
            .map(|s| (*s, redis::Script::new(s.source())))
            .collect();
        RedisRsClient {
            connection,
            scripts,
            timeout: COMMAND_TIMEOUT,
        }
    }

    /// The same client with calls bounded by `timeout` instead of [`COMMAND_TIMEOUT`].
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl<C> fmt::Debug for RedisRsClient<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRsClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl<C> RedisClient for RedisRsClient<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn name(&self) -> &'static str {
        NAME
    }

    async fn eval(&self, script: Script, keys: &[&str], args: &[&[u8]]) -> Result<Reply, Error> {
        let mut invocation = self.scripts[&script].prepare_invoke();
        for key in keys {
            invocation.key(*key);
        }
        for arg in args {
            invocation.arg(*arg);
        }
        let mut connection = self.connection.clone();
        let value: Value = bounded(NAME, self.timeout, "a script call", async {
            invocation
                .invoke_async(&mut connection)
                .await
                .map_err(redis_error)
        })
        .await?;
        Ok(reply(value))
    }

    async fn command(&self, name: &'static str, args: &[&[u8]]) -> Result<Reply, Error> {
        let mut command = redis::cmd(name);
        for arg in args {
            command.arg(*arg);
        }
        let mut connection = self.connection.clone();
        let value: Value = bounded(NAME, self.timeout, name, async {
            command
                .query_async(&mut connection)
                .await
                .map_err(redis_error)
        })
        .await?;
        Ok(reply(value))
    }
}

fn reply(value: Value) -> Reply {
    match value {
        Value::Nil => Reply::Nil,
        Value::Int(i) => Reply::Int(i),
        Value::BulkString(b) => Reply::Bytes(b),
        Value::SimpleString(s) => Reply::Bytes(s.into_bytes()),
        Value::Okay => Reply::Bytes(b"OK".to_vec()),
        Value::Array(items) | Value::Set(items) => {
            Reply::Array(items.into_iter().map(reply).collect())
        }
        Value::Map(pairs) => Reply::Array(
            pairs
                .into_iter()
                .flat_map(|(k, v)| [reply(k), reply(v)])
                .collect(),
        ),
        Value::Double(d) => Reply::Bytes(d.to_string().into_bytes()),
        Value::Boolean(b) => Reply::Int(i64::from(b)),
        Value::VerbatimString { text, .. } => Reply::Bytes(text.into_bytes()),
        Value::Attribute { data, .. } => reply(*data),
        _ => Reply::Nil,
    }
}
