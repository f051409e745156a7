//! Connecting with each client library: the client the driver sends on, and how its idle
//! workers open a connection of their own to wait for wake-ups.

use std::sync::Arc;

use hermes_core::Error;
use hermes_core::driver::{CALL_TIMEOUT, bounded};

use super::{OpenListener, RedisClient};

/// Connects to `url` with the `redis` crate, on one multiplexed connection that is opened
/// again when it breaks and, for plain TCP and RESP2, a direct lane beside it; listeners open
/// a connection of their own to the same server.
#[cfg(feature = "redis-rs")]
pub(crate) async fn open_redis(url: &str) -> Result<(Arc<dyn RedisClient>, OpenListener), Error> {
    use super::RedisRsClient;
    use super::reconnect::ReconnectingConnection;
    use crate::error::redis_error;

    let name = crate::NAME;
    let client = redis::Client::open(url).map_err(|e| Error::Config {
        driver: name,
        message: format!("invalid Redis URL: {e}"),
    })?;
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(CALL_TIMEOUT))
        .set_connection_timeout(Some(CALL_TIMEOUT));
    // Every call of the driver is bounded by `RedisRsClient`'s own timeout: the connection
    // it sends on needs no second timer per command.
    let commands = config.clone().set_response_timeout(None);
    let connection = bounded(name, "connecting", CALL_TIMEOUT, async {
        ReconnectingConnection::open(client.clone(), commands)
            .await
            .map(ReconnectingConnection::with_direct_lane)
            .map_err(redis_error)
    })
    .await?;
    let open: OpenListener = Arc::new(move || {
        let client = client.clone();
        let config = config.clone();
        Box::pin(async move {
            let listener = ReconnectingConnection::open(client, config)
                .await
                .map_err(redis_error)?;
            Ok(Arc::new(RedisRsClient::new(listener)) as Arc<dyn RedisClient>)
        })
    });
    let client = RedisRsClient::new(connection.clone()).with_lane(connection);
    Ok((Arc::new(client), open))
}

/// Connects to a Redis Cluster through any of its `nodes` with the `redis` crate; listeners
/// open a cluster connection of their own.
#[cfg(feature = "redis-rs")]
pub(crate) async fn open_redis_cluster(
    nodes: &[&str],
) -> Result<(Arc<dyn RedisClient>, OpenListener), Error> {
    use super::RedisRsClient;
    use crate::error::redis_error;

    let name = crate::NAME;
    let client = redis::cluster::ClusterClientBuilder::new(nodes.to_vec())
        .response_timeout(CALL_TIMEOUT)
        .connection_timeout(CALL_TIMEOUT)
        .build()
        .map_err(|e| Error::Config {
            driver: name,
            message: format!("invalid Redis Cluster nodes: {e}"),
        })?;
    let connection = bounded(name, "connecting", CALL_TIMEOUT, async {
        client.get_async_connection().await.map_err(redis_error)
    })
    .await?;
    let open: OpenListener = Arc::new(move || {
        let client = client.clone();
        Box::pin(async move {
            let connection = client.get_async_connection().await.map_err(redis_error)?;
            Ok(Arc::new(RedisRsClient::new(connection)) as Arc<dyn RedisClient>)
        })
    });
    Ok((Arc::new(RedisRsClient::new(connection)), open))
}

/// Listeners that wait on `connection`, a connection of the `redis` crate of their own.
#[cfg(feature = "redis-rs")]
pub(crate) fn redis_listener<C>(connection: C) -> OpenListener
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    let client: Arc<dyn RedisClient> = Arc::new(super::RedisRsClient::new(connection));
    Arc::new(move || {
        let client = client.clone();
        Box::pin(async move { Ok(client) })
    })
}

/// How much sooner than the driver's bound fred's own timeout cuts a command.
#[cfg(feature = "fred")]
const FRED_MARGIN: std::time::Duration = std::time::Duration::from_millis(250);

/// A `fred` client for `url`, with a reconnect policy, connected.
#[cfg(feature = "fred")]
pub(crate) async fn open_fred(url: &str) -> Result<fred::clients::Client, Error> {
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
            c.connection_timeout = CALL_TIMEOUT;
            c.internal_command_timeout = CALL_TIMEOUT;
        })
        // A little shorter than the driver's bound on each call, so that fred gives up on a
        // command first: a command fred gave up on is never sent, while one whose caller
        // merely stopped waiting is sent once fred reconnects.
        .with_performance_config(|p| {
            p.default_command_timeout = CALL_TIMEOUT.saturating_sub(FRED_MARGIN);
        })
        .build()
        .map_err(|e| Error::Config {
            driver: name,
            message: e.to_string(),
        })?;
    let connected = bounded(name, "connecting", CALL_TIMEOUT, async {
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
    Ok(client)
}

/// Listeners that wait on a client of their own, with the configuration of `client`
/// (`clone_new`), connected when a worker first waits.
#[cfg(feature = "fred")]
pub(crate) fn fred_listener(client: &fred::clients::Client) -> OpenListener {
    use fred::interfaces::ClientLike;

    let template = client.clone();
    Arc::new(move || {
        let listener = template.clone_new();
        Box::pin(async move {
            listener.init().await.map_err(crate::error::fred_error)?;
            Ok(Arc::new(super::FredClient::new(listener)) as Arc<dyn RedisClient>)
        })
    })
}
