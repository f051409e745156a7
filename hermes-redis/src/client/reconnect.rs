//! A multiplexed connection of the `redis` crate that opens a new one after the old one broke.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisError, RedisFuture, Value};

use super::source::Source;

use super::lane::DirectLane;

/// A `redis::aio::MultiplexedConnection` that is replaced when it breaks.
///
/// A call made while the connection is broken opens a new one; a call that finds the connection
/// lost (the server went away, answered garbage, or became a replica) fails, and the next call
/// reconnects, as it does after a call abandoned after waiting 4 s for its answer (a peer gone
/// without a reset). A call is never sent twice. Clones share one connection, so their calls are pipelined on it.
///
/// With a [direct lane](ReconnectingConnection::with_direct_lane), [`on_lane`](Self::on_lane)
/// sends a command on it while no other call uses it, written and answered on the caller's
/// task. A command through `ConnectionLike` costs what it costs on the plain multiplexed connection, plus one short
/// lock to clone the current connection.
#[derive(Clone)]
pub(crate) struct ReconnectingConnection {
    shared: Arc<Shared>,
}

struct Shared {
    source: Source,
    config: AsyncConnectionConfig,
    current: Mutex<Current>,
    /// Held while a new connection is opened, so that callers arriving meanwhile wait for it
    /// instead of each opening their own.
    opening: tokio::sync::Mutex<()>,
    lane: Option<DirectLane>,
}

/// The connection in use and how many were opened before it: a call that saw connection `n`
/// break drops it only when it is still `n`, not the new one another call opened since. And
/// whether the runtime it was opened on still runs: the connection's task ends with it, so a
/// call from another runtime then opens a new one instead of failing.
struct Current {
    connection: Option<MultiplexedConnection>,
    generation: u64,
    runtime_alive: Weak<()>,
}

/// A token that lives as long as the current runtime runs: a task of that runtime holds it,
/// and is dropped when the runtime shuts down.
fn runtime_alive() -> Weak<()> {
    let alive = Arc::new(());
    let token = Arc::downgrade(&alive);
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            let _alive = alive;
            std::future::pending::<()>().await;
        });
    }
    token
}

impl ReconnectingConnection {
    /// Opens a first connection to the server `source` names with `config`; each new one
    /// asks `source` again (after a failover, Sentinel names another server).
    ///
    /// # Errors
    /// The `redis` crate's error when the connection cannot be opened.
    pub(crate) async fn open(
        source: Source,
        config: AsyncConnectionConfig,
    ) -> Result<Self, RedisError> {
        let first = source
            .client()
            .await?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        Ok(ReconnectingConnection {
            shared: Arc::new(Shared {
                source,
                config,
                current: Mutex::new(Current {
                    connection: Some(first),
                    generation: 0,
                    runtime_alive: runtime_alive(),
                }),
                opening: tokio::sync::Mutex::new(()),
                lane: None,
            }),
        })
    }

    /// The same connection, whose single commands go on a [`DirectLane`] of their own while no
    /// other call uses it, when the source is one fixed server the lane speaks to (plain
    /// TCP, RESP2). Call it before cloning.
    pub(crate) fn with_direct_lane(mut self) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared)
            && let Source::Fixed(client) = &shared.source
        {
            shared.lane = DirectLane::for_client(client);
        }
        self
    }

    fn current(&self) -> Option<(MultiplexedConnection, u64)> {
        let mut current = self.lock_current();
        if current.runtime_alive.strong_count() == 0 {
            current.connection = None;
        }
        current
            .connection
            .clone()
            .map(|connection| (connection, current.generation))
    }

    /// The connection to send on, opened first when the last one broke.
    async fn connection(&self) -> Result<(MultiplexedConnection, u64), RedisError> {
        if let Some(current) = self.current() {
            return Ok(current);
        }
        let _turn = self.shared.opening.lock().await;
        if let Some(current) = self.current() {
            return Ok(current);
        }
        let connection = self
            .shared
            .source
            .client()
            .await?
            .get_multiplexed_async_connection_with_config(&self.shared.config)
            .await?;
        let mut current = self.lock_current();
        current.generation += 1;
        current.connection = Some(connection.clone());
        current.runtime_alive = runtime_alive();
        Ok((connection, current.generation))
    }

    fn waiting(&self, generation: u64) -> HungIfDropped<'_> {
        HungIfDropped {
            connection: self,
            generation,
            since: Instant::now(),
            answered: false,
        }
    }

    /// Drops connection `generation` when `error` says it cannot be used again: it was lost,
    /// or the server is a replica now (`READONLY`, after a failover behind the same address).
    fn judge(&self, generation: u64, error: &RedisError) {
        if error.is_unrecoverable_error() || error.code() == Some("READONLY") {
            self.drop_connections_up_to(generation);
        }
    }

    /// Sends the command `pack` writes (see [`lane::pack`](super::lane::pack)) on the
    /// [direct lane](Self::with_direct_lane) and answers its reply, or a timeout error by
    /// `until` (see [`REARM_AFTER`](super::lane::REARM_AFTER)); `None`, with nothing sent,
    /// when there is no lane or another call uses it.
    ///
    /// # Cancellation safety
    /// Dropping the future closes the lane's connection; the command may have been sent.
    pub(crate) async fn on_lane(
        &self,
        pack: impl FnOnce(&mut Vec<u8>),
        until: tokio::time::Instant,
    ) -> Option<Result<Value, RedisError>> {
        let lease = self.shared.lane.as_ref()?.take()?;
        // A lane connection the server closed or that failed: the multiplexed one, if not
        // newer, went with it, and finding out only when a call fails on it would cost that
        // call.
        let lost = |generation| self.drop_connections_up_to(generation);
        Some(lease.call(pack, until, || self.generation(), lost).await)
    }

    /// The generation of the connection in use, or of the next one while none is.
    fn generation(&self) -> u64 {
        let current = self.lock_current();
        current.generation + u64::from(current.connection.is_none())
    }

    /// Drops the connection in use when it is generation `newest` or older: a call that saw
    /// connection `newest` break (generations only grow) leaves a newer one alone.
    fn drop_connections_up_to(&self, newest: u64) {
        let mut current = self.lock_current();
        if current.generation <= newest {
            current.connection = None;
        }
    }

    fn lock_current(&self) -> MutexGuard<'_, Current> {
        self.shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// How long a call may wait for its answer before, abandoned by its caller (the driver's
/// bound), it counts as a sign of a dead connection: one that lost its peer without a reset
/// never fails by itself.
const HUNG_AFTER: Duration = Duration::from_secs(4);

/// Armed while a call waits for its answer: dropped before the answer after [`HUNG_AFTER`],
/// it drops the connection, so the next call opens a new one.
struct HungIfDropped<'a> {
    connection: &'a ReconnectingConnection,
    generation: u64,
    since: Instant,
    answered: bool,
}

impl Drop for HungIfDropped<'_> {
    fn drop(&mut self) {
        if !self.answered && self.since.elapsed() >= HUNG_AFTER {
            self.connection.drop_connections_up_to(self.generation);
        }
    }
}

impl ConnectionLike for ReconnectingConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (mut connection, generation) = self.connection().await?;
            let mut waiting = self.waiting(generation);
            let result = connection.send_packed_command(cmd).await;
            waiting.answered = true;
            match &result {
                Err(e) => self.judge(generation, e),
                // A single command's server error comes as a value.
                Ok(Value::ServerError(e)) if e.code() == "READONLY" => {
                    self.drop_connections_up_to(generation);
                }
                Ok(_) => {}
            }
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (mut connection, generation) = self.connection().await?;
            let mut waiting = self.waiting(generation);
            let result = connection
                .send_packed_commands(pipeline, offset, count)
                .await;
            waiting.answered = true;
            if let Err(e) = &result {
                self.judge(generation, e);
            }
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.shared.source.db()
    }
}
