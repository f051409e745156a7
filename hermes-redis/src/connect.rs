//! Connecting with each client library.

use hermes_core::Error;

use crate::client::COMMAND_TIMEOUT;
use crate::error::bounded;
use crate::{RedisOptions, RedisSetDriver};

#[cfg(feature = "redis-rs")]
impl RedisSetDriver {
    /// Connects to `url` (`redis://host:port/db`) with the `redis` crate's `ConnectionManager`,
    /// which reconnects after Redis restarts. Connecting, and every call later, takes at most
    /// [`COMMAND_TIMEOUT`](crate::COMMAND_TIMEOUT).
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
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_response_timeout(Some(COMMAND_TIMEOUT))
            .set_connection_timeout(Some(COMMAND_TIMEOUT));
        let manager = bounded(name, COMMAND_TIMEOUT, "connecting", async {
            // One plain connection first: the manager would retry refused credentials until
            // the bound, reporting a timeout instead of the refusal.
            client
                .get_multiplexed_async_connection()
                .await
                .map_err(crate::error::redis_error)?;
            client
                .get_connection_manager_with_config(config)
                .await
                .map_err(crate::error::redis_error)
        })
        .await?;
        RedisSetDriver::from_redis(manager, options)
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
        RedisSetDriver::from_redis(connection, options)
    }

    /// A driver on a connection of the `redis` crate that reconnects by itself:
    /// `redis::aio::ConnectionManager`, or `redis::cluster_async::ClusterConnection`.
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for invalid key names.
    pub fn from_redis<C>(connection: C, options: RedisOptions) -> Result<Self, Error>
    where
        C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
    {
        RedisSetDriver::new(crate::RedisRsClient::new(connection), options)
    }
}

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
            .with_performance_config(|p| p.default_command_timeout = COMMAND_TIMEOUT)
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
    pub fn from_fred(client: fred::clients::Client, options: RedisOptions) -> Result<Self, Error> {
        RedisSetDriver::new(crate::FredClient::new(client), options)
    }
}
