//! The adapter for `fred`.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use fred::bytes::Bytes;
use fred::clients::Client;
use fred::interfaces::ClientLike;
use fred::types::scripts::Script as FredScript;
use fred::types::{ClusterHash, CustomCommand, Value};
use hermes_core::Error;
use hermes_core::driver::{CALL_TIMEOUT, async_trait, bounded};

use super::{RedisClient, Reply, Write};
use crate::FRED_NAME;
use crate::error::fred_error;
use crate::scripts::Script;

/// A `fred` client (standalone or cluster), connected with `init()` and with a reconnect
/// policy so that it comes back after Redis restarts.
///
/// Every call returns within [`CALL_TIMEOUT`] (or the bound given to
/// [`with_timeout`](FredClient::with_timeout)), with a temporary error when Redis did not
/// answer in time.
pub struct FredClient {
    client: Client,
    scripts: HashMap<Script, FredScript>,
    timeout: Duration,
    /// Whether fred's own timeout ends every command within `timeout`, so that a command
    /// needs no timer of the driver's as well.
    bounded_by_fred: bool,
}

impl FredClient {
    /// Wraps `client`.
    pub fn new(client: Client) -> Self {
        let scripts = Script::ALL
            .iter()
            .map(|s| (*s, FredScript::from_lua(s.source())))
            .collect();
        FredClient {
            bounded_by_fred: bounded_by_fred(&client, CALL_TIMEOUT),
            client,
            scripts,
            timeout: CALL_TIMEOUT,
        }
    }

    /// The same client with calls bounded by `timeout` instead of [`CALL_TIMEOUT`].
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self.bounded_by_fred = bounded_by_fred(&self.client, timeout);
        self
    }
}

/// Whether `client` gives up on each command by itself within `timeout` (`connect_fred` sets
/// its timeout a little below the driver's bound).
fn bounded_by_fred(client: &Client, timeout: Duration) -> bool {
    let own = client.perf_config().default_command_timeout;
    !own.is_zero() && own <= timeout
}

impl fmt::Debug for FredClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FredClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl RedisClient for FredClient {
    fn name(&self) -> &'static str {
        FRED_NAME
    }

    async fn eval(&self, script: Script, keys: &[&str], args: &[&[u8]]) -> Result<Reply, Error> {
        let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        let args: Vec<Value> = args
            .iter()
            .map(|a| Value::Bytes(Bytes::copy_from_slice(a)))
            .collect();
        // fred's futures are large: boxed, they are not copied as they are wrapped.
        let call = Box::pin(self.scripts[&script].evalsha_with_reload::<Value, _, _>(
            &self.client,
            keys,
            args,
        ));
        let value: Value = bounded(FRED_NAME, "a script call", self.timeout, async {
            call.await.map_err(fred_error)
        })
        .await?;
        Ok(reply(value))
    }

    async fn command(&self, name: &'static str, args: &[&[u8]]) -> Result<Reply, Error> {
        let args: Vec<Value> = args
            .iter()
            .map(|a| Value::Bytes(Bytes::copy_from_slice(a)))
            .collect();
        let command = CustomCommand::new_static(name, ClusterHash::FirstKey, false);
        let call = Box::pin(self.client.custom::<Value, Value>(command, args));
        let value: Value = if self.bounded_by_fred {
            call.await.map_err(fred_error)?
        } else {
            bounded(FRED_NAME, name, self.timeout, async {
                call.await.map_err(fred_error)
            })
            .await?
        };
        Ok(reply(value))
    }

    /// The write and the `WAIT` go in one pipeline, on the connection to the server of the
    /// write; a script the server does not know is loaded, and the pipeline sent again (the
    /// first one wrote nothing).
    async fn write_then_wait(
        &self,
        write: Write<'_>,
        replicas: u32,
        timeout: Duration,
    ) -> Result<(Reply, u64), Error> {
        const WHAT: &str = "a write waiting for replicas";
        let values = |args: &[&[u8]]| -> Vec<Value> {
            args.iter()
                .map(|a| Value::Bytes(Bytes::copy_from_slice(a)))
                .collect()
        };
        let wait = vec![
            Value::Integer(i64::from(replicas)),
            Value::Integer(i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX)),
        ];
        let pipeline = self.client.pipeline();
        let queued = match write {
            Write::Script(script, keys, args) => {
                // Never on a cluster: the script's keys need not route the call.
                let command = CustomCommand::new_static("EVALSHA", ClusterHash::Random, false);
                let mut evalsha = vec![
                    Value::from(self.scripts[&script].sha1().clone()),
                    Value::Integer(i64::try_from(keys.len()).unwrap_or(i64::MAX)),
                ];
                evalsha.extend(keys.iter().map(|k| Value::from(*k)));
                evalsha.extend(values(args));
                pipeline.custom::<Value, Value>(command, evalsha).await
            }
            Write::Command(name, args) => {
                let command = CustomCommand::new_static(name, ClusterHash::FirstKey, false);
                pipeline.custom::<Value, Value>(command, values(args)).await
            }
        };
        queued.map_err(fred_error)?;
        let command = CustomCommand::new_static("WAIT", ClusterHash::Random, false);
        pipeline
            .custom::<Value, Value>(command, wait)
            .await
            .map_err(fred_error)?;
        bounded(FRED_NAME, WHAT, self.timeout, async {
            let mut loaded = false;
            loop {
                let mut results = Box::pin(pipeline.try_all::<Value>()).await.into_iter();
                let written = results.next().unwrap_or(Ok(Value::Null));
                match written {
                    Err(e) if e.details().starts_with("NOSCRIPT") && !loaded => {
                        if let Write::Script(script, ..) = write {
                            self.scripts[&script]
                                .load(&self.client)
                                .await
                                .map_err(fred_error)?;
                        }
                        loaded = true;
                    }
                    written => {
                        let written = reply(written.map_err(fred_error)?);
                        let acknowledged = reply(
                            results
                                .next()
                                .unwrap_or(Ok(Value::Null))
                                .map_err(fred_error)?,
                        )
                        .count();
                        return Ok((written, acknowledged));
                    }
                }
            }
        })
        .await
    }
}

fn reply(value: Value) -> Reply {
    match value {
        Value::Null | Value::Queued => Reply::Nil,
        Value::Integer(i) => Reply::Int(i),
        Value::Boolean(b) => Reply::Int(i64::from(b)),
        Value::Double(d) => Reply::Bytes(d.to_string().into_bytes()),
        Value::String(s) => Reply::Bytes(s.as_bytes().to_vec()),
        Value::Bytes(b) => Reply::Bytes(b.to_vec()),
        Value::Array(items) => Reply::Array(items.into_iter().map(reply).collect()),
        Value::Map(map) => Reply::Array(
            map.inner()
                .into_iter()
                .flat_map(|(k, v)| [Reply::Bytes(k.as_bytes().to_vec()), reply(v)])
                .collect(),
        ),
    }
}
