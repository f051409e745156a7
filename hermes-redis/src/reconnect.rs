//! A multiplexed connection of the `redis` crate that opens a new one after the old one broke.

use std::sync::{Arc, Mutex, PoisonError};

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, Cmd, Pipeline, RedisError, RedisFuture, Value};

/// A `redis::aio::MultiplexedConnection` that is replaced when it breaks.
///
/// A call made while the connection is broken opens a new one; a call that finds the connection
/// lost (the server went away or answered garbage) fails, and the next call reconnects. A call
/// is never sent twice. Clones share one connection, so their calls are pipelined on it.
///
/// A command costs what it costs on the plain multiplexed connection, plus one short lock to
/// clone the current connection.
#[derive(Clone)]
pub(crate) struct ReconnectingConnection {
    shared: Arc<Shared>,
}

struct Shared {
    client: Client,
    config: AsyncConnectionConfig,
    current: Mutex<Current>,
    /// Held while a new connection is opened, so that callers arriving meanwhile wait for it
    /// instead of each opening their own.
    opening: tokio::sync::Mutex<()>,
}

/// The connection in use and how many were opened before it: a call that saw connection `n`
/// break drops it only when it is still `n`, not the new one another call opened since.
struct Current {
    connection: Option<MultiplexedConnection>,
    generation: u64,
}

impl ReconnectingConnection {
    /// Opens a first connection to `client` with `config`.
    ///
    /// # Errors
    /// The `redis` crate's error when the connection cannot be opened.
    pub(crate) async fn open(
        client: Client,
        config: AsyncConnectionConfig,
    ) -> Result<Self, RedisError> {
        let first = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        Ok(ReconnectingConnection {
            shared: Arc::new(Shared {
                client,
                config,
                current: Mutex::new(Current {
                    connection: Some(first),
                    generation: 0,
                }),
                opening: tokio::sync::Mutex::new(()),
            }),
        })
    }

    fn current(&self) -> Option<(MultiplexedConnection, u64)> {
        let current = self
            .shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
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
            .client
            .get_multiplexed_async_connection_with_config(&self.shared.config)
            .await?;
        let mut current = self
            .shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        current.generation += 1;
        current.connection = Some(connection.clone());
        Ok((connection, current.generation))
    }

    /// Drops connection `generation` when `error` says it cannot be used again.
    fn judge(&self, generation: u64, error: &RedisError) {
        if !error.is_unrecoverable_error() {
            return;
        }
        let mut current = self
            .shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if current.generation == generation {
            current.connection = None;
        }
    }
}

impl ConnectionLike for ReconnectingConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (mut connection, generation) = self.connection().await?;
            let result = connection.send_packed_command(cmd).await;
            if let Err(e) = &result {
                self.judge(generation, e);
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
            let result = connection
                .send_packed_commands(pipeline, offset, count)
                .await;
            if let Err(e) = &result {
                self.judge(generation, e);
            }
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.shared
            .client
            .get_connection_info()
            .redis_settings()
            .db()
    }
}
