//! Connecting with each client library: the client the driver sends on, and how its idle
//! workers open a connection of their own to wait for wake-ups.

use std::sync::Arc;

use hermes_core::Error;
use hermes_core::driver::{CALL_TIMEOUT, bounded};

use super::{OpenKeyspace, OpenListener, RedisClient, WakeConnections};

/// Connects to `url` with the `redis` crate, on one multiplexed connection that is opened
/// again when it breaks and, when `lane` is asked for, for plain TCP and RESP2, a direct lane
/// beside it; listeners open a connection of their own to the same server.
#[cfg(feature = "redis-rs")]
pub(crate) async fn open_redis(
    url: &str,
    ca: Option<Vec<u8>>,
    lane: bool,
) -> Result<(Arc<dyn RedisClient>, WakeConnections), Error> {
    let client = match ca {
        None => redis::Client::open(url),
        Some(ca) => redis::Client::build_with_tls(
            url,
            redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(ca),
            },
        ),
    }
    .map_err(|e| Error::Config {
        driver: crate::NAME,
        message: format!("invalid Redis URL: {e}"),
    })?;
    open_redis_on(super::source::Source::Fixed(Box::new(client)), lane).await
}

/// Connects with the `redis` crate to the master `sentinel` names, on one multiplexed
/// connection that is opened again, to the master named then, when it breaks; listeners and
/// keyspace subscriptions open connections of their own to the master named when they open.
#[cfg(feature = "redis-rs")]
pub(crate) async fn open_redis_sentinel(
    sentinel: &crate::SentinelConfig,
) -> Result<(Arc<dyn RedisClient>, WakeConnections), Error> {
    use redis::sentinel::{SentinelClientBuilder, SentinelServerType};

    let invalid = |e: redis::RedisError| Error::Config {
        driver: crate::NAME,
        message: format!("invalid Sentinel set-up: {e}"),
    };
    let addresses = sentinel
        .sentinels
        .iter()
        .map(|(host, port)| redis::ConnectionAddr::Tcp(host.clone(), *port));
    let mut builder =
        SentinelClientBuilder::new(addresses, &sentinel.master, SentinelServerType::Master)
            .map_err(invalid)?
            .set_client_to_redis_db(i64::from(sentinel.db));
    if let Some(user) = &sentinel.username {
        builder = builder.set_client_to_redis_username(user);
    }
    if let Some(password) = &sentinel.password {
        builder = builder.set_client_to_redis_password(password);
    }
    if let Some(user) = &sentinel.sentinel_username {
        builder = builder.set_client_to_sentinel_username(user);
    }
    if let Some(password) = &sentinel.sentinel_password {
        builder = builder.set_client_to_sentinel_password(password);
    }
    let client = builder.build().map_err(invalid)?;
    let source = super::source::Source::Sentinel {
        sentinel: Arc::new(tokio::sync::Mutex::new(client)),
        db: i64::from(sentinel.db),
    };
    // The direct lane keeps to one address: the master's may change.
    open_redis_on(source, false).await
}

/// Connects with the `redis` crate to the server `source` names (see [`open_redis`]).
#[cfg(feature = "redis-rs")]
async fn open_redis_on(
    source: super::source::Source,
    lane: bool,
) -> Result<(Arc<dyn RedisClient>, WakeConnections), Error> {
    use super::RedisRsClient;
    use super::reconnect::ReconnectingConnection;
    use crate::error::redis_error;

    let name = crate::NAME;
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(CALL_TIMEOUT))
        .set_connection_timeout(Some(CALL_TIMEOUT));
    // Every call of the driver is bounded by `RedisRsClient`'s own timeout: the connection
    // it sends on needs no second timer per command.
    let commands = config.clone().set_response_timeout(None);
    let connection = bounded(name, "connecting", CALL_TIMEOUT, async {
        let connection = ReconnectingConnection::open(source.clone(), commands)
            .await
            .map_err(redis_error)?;
        Ok(if lane {
            connection.with_direct_lane()
        } else {
            connection
        })
    })
    .await?;
    let keyspace = redis_keyspace(source.clone());
    let open: OpenListener = Arc::new(move || {
        let source = source.clone();
        let config = config.clone();
        Box::pin(async move {
            let listener = ReconnectingConnection::open(source, config)
                .await
                .map_err(redis_error)?;
            Ok(Arc::new(RedisRsClient::new(listener)) as Arc<dyn RedisClient>)
        })
    });
    let client = RedisRsClient::new(connection.clone()).with_lane(connection);
    let wakes = WakeConnections {
        listener: Some(open),
        keyspace: Some(keyspace),
    };
    Ok((Arc::new(client), wakes))
}

/// Subscriptions to keyspace events on a pub/sub connection of the `redis` crate of their own,
/// to the server `source` names when each opens.
#[cfg(feature = "redis-rs")]
fn redis_keyspace(source: super::source::Source) -> OpenKeyspace {
    use futures_util::StreamExt;

    let db = source.db();
    Arc::new(move |keys: Vec<String>| {
        let source = source.clone();
        Box::pin(async move {
            let name = crate::NAME;
            let pubsub = bounded(
                name,
                "subscribing to keyspace events",
                CALL_TIMEOUT,
                async {
                    let mut pubsub = source
                        .client()
                        .await
                        .map_err(crate::error::redis_error)?
                        .get_async_pubsub()
                        .await
                        .map_err(crate::error::redis_error)?;
                    for key in keys {
                        pubsub
                            .subscribe(format!("__keyspace@{db}__:{key}"))
                            .await
                            .map_err(crate::error::redis_error)?;
                    }
                    Ok(pubsub)
                },
            )
            .await?;
            let events = pubsub
                .into_on_message()
                .map(|m| m.get_payload::<String>().unwrap_or_default());
            Ok(events.boxed())
        })
    })
}

/// Connects to a Redis Cluster through any of its `nodes` with the `redis` crate; listeners
/// open a cluster connection of their own.
#[cfg(feature = "redis-rs")]
pub(crate) async fn open_redis_cluster(
    nodes: &[&str],
) -> Result<(Arc<dyn RedisClient>, WakeConnections), Error> {
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
    let wakes = WakeConnections {
        listener: Some(open),
        keyspace: None,
    };
    Ok((Arc::new(RedisRsClient::new(connection)), wakes))
}

/// The PEM file `path` names, when it does: the certificate authorities a `rediss://` server
/// must chain to.
pub(crate) fn read_tls_ca(
    path: Option<&std::path::Path>,
    driver: &'static str,
) -> Result<Option<Vec<u8>>, Error> {
    let Some(path) = path else {
        return Ok(None);
    };
    std::fs::read(path).map(Some).map_err(|e| Error::Config {
        driver,
        message: format!(
            "cannot read the certificate authorities of tls_ca ({}): {e}",
            path.display()
        ),
    })
}

/// A rustls connector for `fred` that trusts the certificate authorities in `pem` alone.
#[cfg(feature = "fred")]
fn fred_tls(pem: &[u8]) -> Result<fred::types::config::TlsConnector, Error> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    let refused = |message: String| Error::Config {
        driver: crate::FRED_NAME,
        message,
    };
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(pem) {
        let certificate = certificate
            .map_err(|_| refused("tls_ca holds no readable PEM certificate".to_owned()))?;
        roots
            .add(certificate)
            .map_err(|e| refused(format!("a certificate of tls_ca is not usable: {e}")))?;
    }
    if roots.is_empty() {
        return Err(refused("tls_ca holds no certificate".to_owned()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| refused(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(fred::types::config::TlsConnector::from(config))
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

/// The `fred` configuration of the master `sentinel` names.
#[cfg(feature = "fred")]
pub(crate) fn fred_sentinel_config(
    sentinel: &crate::SentinelConfig,
) -> fred::types::config::Config {
    use fred::types::config::{Config, Server, ServerConfig};

    Config {
        server: ServerConfig::Sentinel {
            hosts: sentinel
                .sentinels
                .iter()
                .map(|(host, port)| Server::new(host.as_str(), *port))
                .collect(),
            service_name: sentinel.master.clone(),
            username: sentinel.sentinel_username.clone(),
            password: sentinel.sentinel_password.clone(),
        },
        username: sentinel.username.clone(),
        password: sentinel.password.clone(),
        database: Some(sentinel.db),
        ..Config::default()
    }
}

/// A `fred` client of `config`, with a reconnect policy, connected.
#[cfg(feature = "fred")]
pub(crate) async fn open_fred(
    mut config: fred::types::config::Config,
    ca: Option<Vec<u8>>,
) -> Result<fred::clients::Client, Error> {
    use fred::interfaces::ClientLike;
    use fred::types::Builder;
    use fred::types::config::ReconnectPolicy;

    let name = crate::FRED_NAME;
    if let Some(ca) = ca {
        config.tls = Some(fred_tls(&ca)?.into());
    }
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

/// Connections for wake-ups on clients of their own with the configuration of `client`,
/// connected when first needed: listeners (`clone_new`), and on a single server,
/// subscriptions to keyspace events.
#[cfg(feature = "fred")]
pub(crate) fn fred_wake_connections(client: &fred::clients::Client) -> WakeConnections {
    use fred::interfaces::ClientLike;

    let single = matches!(
        client.client_config().server,
        fred::types::config::ServerConfig::Centralized { .. }
    );
    WakeConnections {
        listener: Some(fred_listener(client)),
        keyspace: single.then(|| fred_keyspace(client)),
    }
}

/// Listeners that wait on a client of their own, with the configuration of `client`.
#[cfg(feature = "fred")]
fn fred_listener(client: &fred::clients::Client) -> OpenListener {
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

/// Subscriptions to keyspace events on a `fred` subscriber client of their own, which
/// subscribes again after it reconnects.
#[cfg(feature = "fred")]
fn fred_keyspace(client: &fred::clients::Client) -> OpenKeyspace {
    use fred::clients::SubscriberClient;
    use fred::interfaces::{ClientLike, EventInterface, PubsubInterface};

    let template = client.clone();
    Arc::new(move |keys: Vec<String>| {
        let config = template.client_config();
        let db = config.database.unwrap_or(0);
        let subscriber = SubscriberClient::new(
            config,
            Some(template.perf_config()),
            Some(template.connection_config().clone()),
            template.client_reconnect_policy(),
        );
        Box::pin(async move {
            let name = crate::FRED_NAME;
            let events = subscriber.keyspace_event_rx();
            let subscribed = bounded(
                name,
                "subscribing to keyspace events",
                CALL_TIMEOUT,
                async {
                    subscriber.init().await.map_err(crate::error::fred_error)?;
                    let channels: Vec<String> = keys
                        .iter()
                        .map(|key| format!("__keyspace@{db}__:{key}"))
                        .collect();
                    subscriber
                        .subscribe(channels)
                        .await
                        .map_err(crate::error::fred_error)
                },
            )
            .await;
            let subscription = Subscription {
                resubscribing: subscriber.manage_subscriptions(),
                subscriber,
            };
            subscribed?;
            let events = futures_util::stream::unfold(
                (events, subscription),
                |(mut events, subscription)| async move {
                    use tokio::sync::broadcast::error::RecvError;
                    match events.recv().await {
                        Ok(event) => Some((event.operation, (events, subscription))),
                        // Some were missed: one event wakes as well as many.
                        Err(RecvError::Lagged(_)) => Some((String::new(), (events, subscription))),
                        Err(RecvError::Closed) => None,
                    }
                },
            );
            Ok(Box::pin(events) as futures_util::stream::BoxStream<'static, String>)
        })
    })
}

/// A `fred` subscriber client and its task that subscribes again after a reconnect; both end
/// with it.
#[cfg(feature = "fred")]
struct Subscription {
    subscriber: fred::clients::SubscriberClient,
    resubscribing: tokio::task::JoinHandle<()>,
}

#[cfg(feature = "fred")]
impl Drop for Subscription {
    fn drop(&mut self) {
        use fred::interfaces::ClientLike;

        self.resubscribing.abort();
        let subscriber = self.subscriber.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = subscriber.quit().await;
            });
        }
    }
}
