//! Where a connection of the `redis` crate goes: one fixed server, or the master that Redis
//! Sentinel names at the time.

use std::sync::Arc;

use redis::sentinel::SentinelClient;
use redis::{Client, RedisResult};

/// The server a new connection of the `redis` crate opens to.
#[derive(Clone)]
pub(crate) enum Source {
    /// Always this server.
    Fixed(Box<Client>),
    /// The master Sentinel names when asked, checked to be a master (`ROLE`).
    Sentinel {
        /// Asks the sentinels in turn; one question at a time.
        sentinel: Arc<tokio::sync::Mutex<SentinelClient>>,
        /// The database of the master's connections.
        db: i64,
    },
}

impl Source {
    /// A client of the server to open a connection to now.
    ///
    /// # Errors
    /// With Sentinel, when no sentinel answers or the master it names does not answer as a
    /// master (during a failover): the `redis` crate's error.
    pub(crate) async fn client(&self) -> RedisResult<Client> {
        match self {
            Source::Fixed(client) => Ok((**client).clone()),
            Source::Sentinel { sentinel, .. } => sentinel.lock().await.async_get_client().await,
        }
    }

    /// The database its connections select.
    pub(crate) fn db(&self) -> i64 {
        match self {
            Source::Fixed(client) => client.get_connection_info().redis_settings().db(),
            Source::Sentinel { db, .. } => *db,
        }
    }
}
