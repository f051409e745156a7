//! Connecting with each client library.

use std::sync::Arc;

use hermes_core::Error;

use crate::client::{COMMAND_TIMEOUT, RedisClient};
use crate::error::bounded;
#[cfg(feature = "redis-rs")]
use crate::reconnect::ReconnectingConnection;
use crate::wake::OpenListener;
use crate::{RedisOptions, RedisSetDriver};

#[cfg(feature = "redis-rs")]
impl RedisSetDriver {
    /// Connects to `url` (`redis://host:port/db`) with the `redis` crate, on one multiplexed
    /// connection that is opened again when it breaks, so the driver comes back after Redis
    /// restarts. Connecting, and every call later, takes at most
    /// [`COMMAND_TIMEOUT`](crate::COMMAND_TIMEOUT).
    ///
    /// For plain TCP and RESP2 (the default) the driver also keeps a second connection, its
    /// direct lane: a call made while no other call uses the lane is written and answered
    /// there by the calling task itself, without the hand-over to the multiplexed
    /// connection's task, so a single emitter goes at the speed of a bare socket; calls made
    /// meanwhile go on the multiplexed connection, which pipelines them. A lane connection
    /// that Redis closed while idle is replaced before the next call, and then the
    /// multiplexed one too; so are both after a `READONLY` answer (a failover behind the same
    /// address). A call on the lane gives up at its bound or up to a second before it, never
    /// after.
    ///
    /// # Errors
    /// [`Error::Config`] for a bad URL or refused credentials; a temporary error when Redis
    /// cannot be reached.
    pub async fn connect_redis(url: &str, options: RedisOptions) -> Result<Self, Error> {
        let name = crate::NAME;
        let client = redis::Client::open(url).map_err(|e| Error::Config {
            driver: name,
            message: format!("invalid Redis URL: {e}"),
        })?;
        let config = redis::AsyncConnectionConfig::new()
            .set_response_timeout(Some(COMMAND_TIMEOUT))
            .set_connection_timeout(Some(COMMAND_TIMEOUT));
        // Every call of the driver is bounded by `RedisRsClient`'s own timeout: the connection
        // it sends on needs no second timer per command.
        let commands = config.clone().set_response_timeout(None);
        let connection = bounded(name, COMMAND_TIMEOUT, "connecting", async {
            ReconnectingConnection::open(client.clone(), commands)
                .await
                .map(ReconnectingConnection::with_direct_lane)
                .map_err(crate::error::redis_error)
        })
        .await?;
        let open: OpenListener = Arc::new(move || {
            let client = client.clone();
            let config = config.clone();
            Box::pin(async move {
                let listener = ReconnectingConnection::open(client, config)
                    .await
                    .map_err(crate::error::redis_error)?;
                Ok(Arc::new(crate::RedisRsClient::new(listener)) as Arc<dyn RedisClient>)
            })
        });
        let client = crate::RedisRsClient::new(connection.clone()).with_lane(connection);
        Ok(RedisSetDriver::new(client, options)?.with_listener(open))
    }

    /// Connects to a Redis Cluster through any of its `nodes` (`redis://host:port`) with the
    /// `redis` crate. Give [`RedisOptions::hash_tag`] so all keys of the queue share a slot.
    ///
    /// # Errors
    /// [`Error::Config`] for bad URLs or refused credentials; a temporary error when the
    /// cluster cannot be reached.
    pub async fn connect_redis_cluster(
        nodes: &[&str],
        options: RedisOptions,
    ) -> Result<Self, Error> {
        let name = crate::NAME;
        let client = redis::cluster::ClusterClientBuilder::new(nodes.to_vec())
            .response_timeout(COMMAND_TIMEOUT)
            .connection_timeout(COMMAND_TIMEOUT)
            .build()
            .map_err(|e| Error::Config {
                driver: name,
                message: format!("invalid Redis Cluster nodes: {e}"),
            })?;
        let connection = bounded(name, COMMAND_TIMEOUT, "connecting", async {
            client
                .get_async_connection()
                .await
                .map_err(crate::error::redis_error)
        })
        .await?;
        let open: OpenListener = Arc::new(move || {
            let client = client.clone();
            Box::pin(async move {
                let connection = client
                    .get_async_connection()
                    .await
                    .map_err(crate::error::redis_error)?;
                Ok(Arc::new(crate::RedisRsClient::new(connection)) as Arc<dyn RedisClient>)
            })
        });
        Ok(RedisSetDriver::from_redis(connection, options)?.with_listener(open))
    }

    /// A driver on a connection of the `redis` crate that reconnects by itself:
    /// `redis::aio::ConnectionManager` say, or `redis::cluster_async::ClusterConnection`.
    /// ([`connect_redis`](Self::connect_redis) uses a multiplexed connection it opens again when
    /// it breaks, which costs less per command than a `ConnectionManager`.)
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for invalid key names.
    pub fn from_redis<C>(connection: C, options: RedisOptions) -> Result<Self, Error>
    where
        C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
    {
        RedisSetDriver::new(crate::RedisRsClient::new(connection), options)
    }

    /// The same driver, whose idle workers wait for [wake-ups](RedisOptions::wake_ups) on
    /// `connection`, a connection of its own (blocking commands would hold up everything else
    /// on a shared one). The `connect_*` functions and `from_url` open one by themselves.
    #[must_use]
    pub fn with_wake_connection<C>(self, connection: C) -> Self
    where
        C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
    {
        let client: Arc<dyn RedisClient> = Arc::new(crate::RedisRsClient::new(connection));
        self.with_listener(Arc::new(move || {
            let client = client.clone();
            Box::pin(async move { Ok(client) })
        }))
    }
}

/// How much sooner than the driver's bound fred's own timeout cuts a command.
#[cfg(feature = "fred")]
const FRED_MARGIN: std::time::Duration = std::time::Duration::from_millis(250);

#[cfg(feature = "fred")]
impl RedisSetDriver {
    /// Connects to `url` (`redis://host:port/db`, or `redis-cluster://host:port` for a cluster)
    /// with `fred`, with a reconnect policy so that it comes back after Redis restarts.
    /// Connecting, and every call later, takes at most [`COMMAND_TIMEOUT`](crate::COMMAND_TIMEOUT).
    ///
    /// # Errors
    /// [`Error::Config`] for a bad URL or refused credentials; a temporary error when Redis
    /// cannot be reached.
    pub async fn connect_fred(url: &str, options: RedisOptions) -> Result<Self, Error> {
        use fred::interfaces::ClientLike;
        use fred::types::Builder;
        use fred::types::config::{Config, ReconnectPolicy};

        let name = crate::FRED_NAME;
        let config = Config::from_url(url).map_err(|e| Error::Config {
            driver: name,
            message: format!("invalid Redis URL: {e}"),
        })?;
        let client = Builder::from_config(config)
            .set_policy(ReconnectPolicy::new_exponential(0, 100, 2_000, 2))
            .with_connection_config(|c| {
                c.connection_timeout = COMMAND_TIMEOUT;
                c.internal_command_timeout = COMMAND_TIMEOUT;
            })
            // A little shorter than the driver's bound on each call, so that fred gives up on a
            // command first: a command fred gave up on is never sent, while one whose caller
            // merely stopped waiting is sent once fred reconnects.
            .with_performance_config(|p| {
                p.default_command_timeout = COMMAND_TIMEOUT.saturating_sub(FRED_MARGIN);
            })
            .build()
            .map_err(|e| Error::Config {
                driver: name,
                message: e.to_string(),
            })?;
        let connected = bounded(name, COMMAND_TIMEOUT, "connecting", async {
            client
                .init()
                .await
                .map(drop)
                .map_err(crate::error::fred_error)
        })
        .await;
        if let Err(e) = connected {
            let _ = client.quit().await;
            return Err(e);
        }
        RedisSetDriver::from_fred(client, options)
    }

    /// A driver on a connected `fred` client (standalone or cluster).
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for invalid key names.
    /// Its idle workers wait for [wake-ups](RedisOptions::wake_ups) on a client of their own,
    /// with the same configuration (`clone_new`), connected when a worker first waits.
    pub fn from_fred(client: fred::clients::Client, options: RedisOptions) -> Result<Self, Error> {
        use fred::interfaces::ClientLike;

        let template = client.clone();
        let open: OpenListener = Arc::new(move || {
            let listener = template.clone_new();
            Box::pin(async move {
                listener.init().await.map_err(crate::error::fred_error)?;
                Ok(Arc::new(crate::FredClient::new(listener)) as Arc<dyn RedisClient>)
            })
        });
        Ok(RedisSetDriver::new(crate::FredClient::new(client), options)?.with_listener(open))
    }
}
