//! The adapter for the `redis` crate: a connection that reconnects by itself, or a cluster
//! connection.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use hermes_core::Error;
use hermes_core::driver::{CALL_TIMEOUT, async_trait, bounded_until, deadline, no_answer};
use redis::aio::ConnectionLike;
use redis::{ErrorKind, ServerErrorKind, Value};
use tokio::time::Instant;

use super::lane;
use super::reconnect::ReconnectingConnection;
use super::{RedisClient, Reply, Write};
use crate::NAME;
use crate::error::redis_error;
use crate::scripts::Script;

/// A connection of the `redis` crate that reconnects by itself and can be cloned cheaply:
/// `redis::aio::ConnectionManager` say, or `redis::cluster_async::ClusterConnection`.
/// (`connect_redis` uses a multiplexed connection it opens again when it breaks, which costs
/// less per command than a `ConnectionManager`.)
///
/// Every call returns within [`CALL_TIMEOUT`] (or the bound given to
/// [`with_timeout`](RedisRsClient::with_timeout)), with a temporary error when Redis did not
/// answer in time.
pub struct RedisRsClient<C> {
    connection: C,
    scripts: HashMap<Script, redis::Script>,
    timeout: Duration,
    /// A connection whose direct lane takes single calls first (`connect_redis`'s).
    lane: Option<ReconnectingConnection>,
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
            timeout: CALL_TIMEOUT,
            lane: None,
        }
    }

    /// The same client, whose calls go on the direct lane of `lane` while no other call uses
    /// it, packed here without building a `redis::Cmd`.
    pub(crate) fn with_lane(mut self, lane: ReconnectingConnection) -> Self {
        self.lane = Some(lane);
        self
    }

    /// The answer to the command of `parts` (`what` for errors) on the direct lane, which
    /// ends by `until` by itself; `None`, with nothing sent, when there is none or it
    /// is in use.
    async fn on_lane<'a>(
        &self,
        what: &str,
        parts: impl ExactSizeIterator<Item = &'a [u8]>,
        until: Instant,
    ) -> Option<Result<Value, LaneError>> {
        let answer = self
            .lane
            .as_ref()?
            .on_lane(|out| lane::pack(out, parts), until)
            .await?;
        Some(match answer.and_then(Value::extract_error) {
            Ok(value) => Ok(value),
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                Err(LaneError::NoScript(e))
            }
            Err(e) if e.is_timeout() => Err(LaneError::Hermes(no_answer(NAME, what, self.timeout))),
            Err(e) => Err(LaneError::Hermes(redis_error(e))),
        })
    }

    /// The same client with calls bounded by `timeout` instead of [`CALL_TIMEOUT`].
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
        const WHAT: &str = "a script call";
        let source = script.source();
        let script = &self.scripts[&script];
        let count = keys.len().to_string();
        let evalsha = || {
            let parts = [
                b"EVALSHA".as_slice(),
                script.get_hash().as_bytes(),
                count.as_bytes(),
            ];
            let parts = parts
                .into_iter()
                .chain(keys.iter().map(|k| k.as_bytes()))
                .chain(args.iter().copied());
            ExactLength(parts, 3 + keys.len() + args.len())
        };
        let load = [b"SCRIPT".as_slice(), b"LOAD", source.as_bytes()];
        // One limit for the whole call, however many steps it takes.
        let until = deadline(self.timeout);
        let mut answer = self.on_lane(WHAT, evalsha(), until).await;
        if let Some(Err(LaneError::NoScript(_))) = answer {
            // Not loaded yet (a restarted Redis, say): loaded, and run again.
            answer = match self.on_lane(WHAT, load.into_iter(), until).await {
                Some(Ok(_)) => self.on_lane(WHAT, evalsha(), until).await,
                Some(Err(LaneError::Hermes(e))) => return Err(e),
                Some(Err(LaneError::NoScript(_))) | None => None,
            };
        }
        match answer {
            Some(Ok(value)) => return Ok(reply(value)),
            Some(Err(LaneError::Hermes(e))) => return Err(e),
            // The lane is in use: the invocation below loads the script if need be.
            Some(Err(LaneError::NoScript(_))) | None => {}
        }
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(*key);
        }
        for arg in args {
            invocation.arg(*arg);
        }
        self.multiplexed(WHAT, until, |mut connection| async move {
            invocation.invoke_async(&mut connection).await
        })
        .await
    }

    async fn command(&self, name: &'static str, args: &[&[u8]]) -> Result<Reply, Error> {
        let parts = std::iter::once(name.as_bytes()).chain(args.iter().copied());
        let until = deadline(self.timeout);
        match self
            .on_lane(name, ExactLength(parts, 1 + args.len()), until)
            .await
        {
            Some(Ok(value)) => return Ok(reply(value)),
            Some(Err(LaneError::Hermes(e))) => return Err(e),
            Some(Err(LaneError::NoScript(e))) => return Err(redis_error(e)),
            None => {}
        }
        let mut command = redis::cmd(name);
        for arg in args {
            command.arg(*arg);
        }
        self.multiplexed(name, until, |mut connection| async move {
            command.query_async(&mut connection).await
        })
        .await
    }

    /// The write and the `WAIT` go in one pipeline, so on one connection whatever the
    /// connection `C` is; a script the server does not know is loaded, and the pipeline sent
    /// again (the first one wrote nothing).
    async fn write_then_wait(
        &self,
        write: Write<'_>,
        replicas: u32,
        timeout: Duration,
    ) -> Result<(Reply, u64), Error> {
        const WHAT: &str = "a write waiting for replicas";
        let until = deadline(self.timeout);
        let mut pipeline = redis::pipe();
        match write {
            Write::Script(script, keys, args) => {
                pipeline
                    .cmd("EVALSHA")
                    .arg(self.scripts[&script].get_hash())
                    .arg(keys.len())
                    .arg(keys)
                    .arg(args);
            }
            Write::Command(name, args) => {
                pipeline.cmd(name).arg(args);
            }
        }
        pipeline
            .cmd("WAIT")
            .arg(replicas)
            .arg(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
        let mut loaded = false;
        loop {
            let sent = bounded_until(NAME, WHAT, until, self.timeout, async {
                let mut connection = self.connection.clone();
                Ok(Box::pin(pipeline.query_async::<Vec<Value>>(&mut connection)).await)
            })
            .await?;
            let mut values = match sent {
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) && !loaded => {
                    let Write::Script(script, ..) = write else {
                        return Err(redis_error(e));
                    };
                    let load = redis::cmd("SCRIPT")
                        .arg("LOAD")
                        .arg(script.source())
                        .to_owned();
                    self.multiplexed(WHAT, until, |mut connection| async move {
                        load.query_async(&mut connection).await
                    })
                    .await?;
                    loaded = true;
                    continue;
                }
                sent => sent.map_err(redis_error)?.into_iter(),
            };
            let written = values.next().map_or(Reply::Nil, reply);
            let acknowledged = values.next().map_or(Reply::Nil, reply).count();
            return Ok((written, acknowledged));
        }
    }
}

impl<C: Clone> RedisRsClient<C> {
    /// The answer to what `call` sends on a clone of the connection (`what` for errors),
    /// giving up at `until`.
    async fn multiplexed<F>(
        &self,
        what: &str,
        until: Instant,
        call: impl FnOnce(C) -> F,
    ) -> Result<Reply, Error>
    where
        F: Future<Output = redis::RedisResult<Value>>,
    {
        let value = bounded_until(NAME, what, until, self.timeout, async {
            // Boxed: the call's future is large, and the lane's path should not carry it.
            Box::pin(call(self.connection.clone()))
                .await
                .map_err(redis_error)
        })
        .await?;
        Ok(reply(value))
    }
}

/// How a call on the direct lane failed.
enum LaneError {
    /// The script is not loaded: the caller loads it.
    NoScript(redis::RedisError),
    /// Any other failure, as the driver reports it.
    Hermes(Error),
}

/// An iterator of a length known beforehand.
struct ExactLength<I>(I, usize);

impl<I: Iterator> Iterator for ExactLength<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let next = self.0.next();
        self.1 = self.1.saturating_sub(usize::from(next.is_some()));
        next
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.1, Some(self.1))
    }
}

impl<I: Iterator> ExactSizeIterator for ExactLength<I> {}

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
