//! The Redis driver's URL: `redis://127.0.0.1:6379/0?key=hermes`, read into the client
//! library, the server or cluster and the options it names.

use hermes_core::Error;
use hermes_core::driver::DriverUrl;

use crate::naming::Keys;
use crate::{DeliveryMode, RedisOptions, ReplicaWait, SentinelConfig};

/// The port of a sentinel whose address gives none.
const SENTINEL_PORT: u16 = 26379;

/// How long a replica wait lasts when the URL gives `replica_wait` alone.
const REPLICA_WAIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// The parameters a Redis URL takes.
const PARAMETERS: [&str; 18] = [
    "key",
    "schedule_key",
    "hash_tag",
    "client",
    "delivery",
    "visibility_timeout",
    "refresh_interval",
    "prefetch",
    "deferred_acks",
    "wake_ups",
    "keyspace_wake_ups",
    "tls_ca",
    "nodes",
    "replica_wait",
    "replica_wait_timeout",
    "sentinel_user",
    "sentinel_password",
    "db",
];

/// What a URL names: the client library, the server or cluster, and the options.
// A build without a client library refuses every URL: nothing reads what it names.
#[cfg_attr(not(any(feature = "redis-rs", feature = "fred")), allow(dead_code))]
pub(crate) struct UrlConfig {
    pub(crate) library: Library,
    pub(crate) target: Target,
    pub(crate) options: RedisOptions,
}

/// The client library a URL's `client` names, of those this build has.
pub(crate) enum Library {
    /// The `redis` crate: `client=redis`, the default.
    #[cfg(feature = "redis-rs")]
    RedisRs,
    /// `fred`: `client=fred`.
    #[cfg(feature = "fred")]
    Fred,
}

/// Where a URL connects.
#[cfg_attr(not(any(feature = "redis-rs", feature = "fred")), allow(dead_code))]
pub(crate) enum Target {
    /// One server, at this URL without the driver's parameters.
    One(String),
    /// A Redis Cluster, found through these nodes (`redis://` URLs, the URL's own node first).
    Cluster(Vec<String>),
    /// The master Redis Sentinel names.
    Sentinel(SentinelConfig),
}

impl UrlConfig {
    /// Reads `url` (see [`RedisSetDriver::from_url`](crate::RedisSetDriver::from_url)): every
    /// mistake is found here, before anything connects.
    ///
    /// # Errors
    /// Those of `from_url` but for connection errors.
    #[cfg_attr(
        not(any(feature = "redis-rs", feature = "fred")),
        allow(unreachable_code, unused_variables)
    )]
    pub(crate) fn parse(url: &str) -> Result<Self, Error> {
        let (url, more_sentinels) = split_sentinels(url);
        let mut url = DriverUrl::parse(
            &url,
            crate::NAME,
            &["redis", "rediss", "redis+cluster", "redis+sentinel"],
        )?;
        let mut options = RedisOptions::default();
        if let Some(key) = url.take("key") {
            options.key = key;
        }
        if let Some(key) = url.take("schedule_key") {
            options.schedule_key = key;
        }
        options.hash_tag = url.take("hash_tag");
        if let Some(delivery) = url.take("delivery") {
            options.delivery = match delivery.as_str() {
                "at-least-once" => DeliveryMode::AtLeastOnce,
                "at-most-once" => DeliveryMode::AtMostOnce,
                _ => return Err(url.error("delivery is at-least-once or at-most-once")),
            };
        }
        if let Some(timeout) = url.take_seconds("visibility_timeout")? {
            options.visibility_timeout = timeout;
        }
        if let Some(interval) = url.take_seconds("refresh_interval")? {
            options.refresh_interval = interval;
        }
        if let Some(prefetch) = url.take_parsed("prefetch", "a whole number")? {
            options.prefetch = prefetch;
        }
        if let Some(deferred) = url.take_bool("deferred_acks")? {
            options.deferred_acks = deferred;
        }
        if let Some(wake_ups) = url.take_bool("wake_ups")? {
            options.wake_ups = wake_ups;
        }
        if let Some(keyspace) = url.take_bool("keyspace_wake_ups")? {
            options.keyspace_wake_ups = keyspace;
        }
        if let Some(ca) = url.take("tls_ca") {
            if url.scheme() != "rediss" {
                return Err(url.error("tls_ca is for rediss:// URLs"));
            }
            options.tls_ca = Some(ca.into());
        }
        let replicas = url.take_parsed::<u32>("replica_wait", "a number of replicas")?;
        let wait_timeout = url.take_seconds("replica_wait_timeout")?;
        options.replica_wait = match (replicas, wait_timeout) {
            (Some(0) | None, None) => None,
            (Some(0) | None, Some(_)) => {
                return Err(url.error("replica_wait_timeout needs replica_wait=<replicas>"));
            }
            (Some(replicas), timeout) => Some(ReplicaWait::new(
                replicas,
                timeout.unwrap_or(REPLICA_WAIT_TIMEOUT),
            )),
        };
        if let Some(wait) = options.replica_wait
            && wait.timeout >= hermes_core::driver::CALL_TIMEOUT
        {
            return Err(url.error(format!(
                "replica_wait_timeout is shorter than a call's bound ({} s)",
                hermes_core::driver::CALL_TIMEOUT.as_secs_f64()
            )));
        }
        let client = url.take("client").unwrap_or_else(|| "redis".to_owned());
        let cluster = url.scheme() == "redis+cluster";
        if cluster && options.replica_wait.is_some() {
            return Err(url.error("replica_wait is not offered on a Redis Cluster"));
        }
        let sentinel = if url.scheme() == "redis+sentinel" {
            Some(sentinel_config(&mut url, &more_sentinels)?)
        } else {
            for name in ["sentinel_user", "sentinel_password", "db"] {
                if url.take(name).is_some() {
                    return Err(url.error(format!("{name} is for redis+sentinel:// URLs")));
                }
            }
            None
        };
        let nodes = url.take("nodes");
        if nodes.is_some() && !cluster {
            return Err(url.error("nodes is for redis+cluster:// URLs"));
        }
        if cluster && options.hash_tag.is_none() {
            return Err(url.error(
                "a redis+cluster:// URL needs hash_tag=<tag>, so every key of the queue lives in one slot",
            ));
        }
        let target = url.without_query();
        url.finish(&PARAMETERS)?;
        Keys::new(&options)?;
        let library = match client.as_str() {
            #[cfg(feature = "redis-rs")]
            "redis" => Library::RedisRs,
            #[cfg(feature = "fred")]
            "fred" => Library::Fred,
            other => return Err(unknown_client(other)),
        };
        let target = if let Some(sentinel) = sentinel {
            Target::Sentinel(sentinel)
        } else if cluster {
            let first = target.replacen("redis+cluster://", "redis://", 1);
            let mut nodes_urls = vec![first];
            for node in nodes.iter().flat_map(|n| n.split(',')) {
                nodes_urls.push(with_host(&nodes_urls[0], node));
            }
            Target::Cluster(nodes_urls)
        } else {
            Target::One(target)
        };
        Ok(UrlConfig {
            library,
            target,
            options,
        })
    }
}

/// A `redis+sentinel://` URL with one sentinel address left in its authority (the URL
/// grammar has room for one), and the others; any other URL as it is.
fn split_sentinels(url: &str) -> (String, Vec<String>) {
    const SCHEME: &str = "redis+sentinel://";
    let Some(rest) = url.strip_prefix(SCHEME) else {
        return (url.to_owned(), Vec::new());
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (credentials, hosts) = match authority.rsplit_once('@') {
        Some((credentials, hosts)) => (format!("{credentials}@"), hosts),
        None => (String::new(), authority),
    };
    let mut hosts = hosts.split(',');
    let first = hosts.next().unwrap_or_default();
    let others = hosts.map(str::to_owned).collect();
    (format!("{SCHEME}{credentials}{first}{tail}"), others)
}

/// The Sentinel set-up a `redis+sentinel://` URL names: its sentinels (the URL's, then
/// `more`), the master's name (its path), the credentials (the URL's for the master,
/// `sentinel_user` and `sentinel_password` for the sentinels) and `db`.
fn sentinel_config(url: &mut DriverUrl, more: &[String]) -> Result<SentinelConfig, Error> {
    let path = url.path()?;
    let master = path.trim_start_matches('/');
    if master.is_empty() || master.contains('/') {
        return Err(url.error(
            "a redis+sentinel:// URL names the master after the sentinels: \
             redis+sentinel://host:26379,host:26379/<master name>",
        ));
    }
    let mut sentinels = vec![(
        url.host().unwrap_or_default().to_owned(),
        url.port().unwrap_or(SENTINEL_PORT),
    )];
    for address in more {
        let (host, port) = match address.rsplit_once(':') {
            Some((host, port)) => (host, port.parse().ok()),
            None => (address.as_str(), Some(SENTINEL_PORT)),
        };
        match port {
            Some(port) if !host.is_empty() => sentinels.push((host.to_owned(), port)),
            _ => {
                return Err(url.error(format!(
                    "a sentinel's address is host:port, not {:?}",
                    hermes_core::driver::excerpt(address)
                )));
            }
        }
    }
    if sentinels[0].0.is_empty() {
        return Err(url.error("a redis+sentinel:// URL names at least one sentinel"));
    }
    let mut config = SentinelConfig::new(sentinels, master);
    config.username = url.username();
    config.password = url.password();
    config.sentinel_username = url.take("sentinel_user");
    config.sentinel_password = url.take("sentinel_password");
    if let Some(db) = url.take_parsed("db", "a database number")? {
        config.db = db;
    }
    Ok(config)
}

/// `url` with its host and port replaced by `node`, keeping the credentials.
fn with_host(url: &str, node: &str) -> String {
    let rest = url.strip_prefix("redis://").unwrap_or(url);
    let credentials = rest
        .split_once('@')
        .map_or(String::new(), |(c, _)| format!("{c}@"));
    format!("redis://{credentials}{node}")
}

fn unknown_client(client: &str) -> Error {
    Error::Config {
        driver: crate::NAME,
        message: format!(
            "client is redis or fred (as this build has them), not {:?}",
            hermes_core::driver::excerpt(client)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mistakes_are_named_before_connecting_and_hide_the_password() {
        for (url, says) in [
            ("amqp://x", "redis://"),
            ("redis://:hunter2@127.0.0.1:1/?colour=red", "colour"),
            (
                "redis://:hunter2@127.0.0.1:1/?delivery=sometimes",
                "delivery",
            ),
            ("redis://:hunter2@127.0.0.1:1/?prefetch=many", "prefetch"),
            ("redis://:hunter2@127.0.0.1:1/?client=jedis", "client"),
            ("redis+cluster://:hunter2@127.0.0.1:1", "hash_tag"),
            ("redis://:hunter2@127.0.0.1:1/?nodes=a:1", "nodes"),
            ("redis://:hunter2@127.0.0.1:1/?key=a%20b", "name"),
            ("redis+sentinel://:hunter2@127.0.0.1:1", "master"),
            ("redis+sentinel://:hunter2@127.0.0.1:1,h:x/m", "host:port"),
            ("redis+sentinel://:hunter2@127.0.0.1:1/m?db=many", "db"),
            (
                "redis://:hunter2@127.0.0.1:1/?sentinel_password=x",
                "sentinel",
            ),
            (
                "redis://:hunter2@127.0.0.1:1/?replica_wait=two",
                "replica_wait",
            ),
            (
                "redis://:hunter2@127.0.0.1:1/?replica_wait_timeout=1",
                "replica_wait",
            ),
            (
                "redis://:hunter2@127.0.0.1:1/?replica_wait=1&replica_wait_timeout=9",
                "shorter",
            ),
            (
                "redis+cluster://:hunter2@127.0.0.1:1/?hash_tag=q&replica_wait=1",
                "Cluster",
            ),
        ] {
            let Err(err) = UrlConfig::parse(url) else {
                panic!("{url} was accepted");
            };
            let err = err.to_string();
            assert!(err.contains(says), "{url}: {err}");
            assert!(!err.contains("hunter2"), "{url}: {err}");
        }
    }

    #[test]
    fn a_sentinel_url_names_the_sentinels_the_master_and_both_passwords() {
        let config = UrlConfig::parse(
            "redis+sentinel://app:m%40ster@10.0.0.1:26380,10.0.0.2,10.0.0.3:26381/jobs\
             ?sentinel_user=watch&sentinel_password=s3nt&db=2&replica_wait=1",
        )
        .unwrap();
        let Target::Sentinel(sentinel) = config.target else {
            panic!("not a Sentinel target");
        };
        assert_eq!(
            sentinel.sentinels,
            [
                ("10.0.0.1".to_owned(), 26380),
                ("10.0.0.2".to_owned(), SENTINEL_PORT),
                ("10.0.0.3".to_owned(), 26381)
            ]
        );
        assert_eq!(sentinel.master, "jobs");
        assert_eq!(sentinel.username.as_deref(), Some("app"));
        assert_eq!(sentinel.password.as_deref(), Some("m@ster"));
        assert_eq!(sentinel.sentinel_username.as_deref(), Some("watch"));
        assert_eq!(sentinel.sentinel_password.as_deref(), Some("s3nt"));
        assert_eq!(sentinel.db, 2);
        let debug = format!("{sentinel:?}");
        assert!(
            !debug.contains("m@ster") && !debug.contains("s3nt"),
            "{debug}"
        );
        assert_eq!(
            config.options.replica_wait,
            Some(ReplicaWait::new(1, REPLICA_WAIT_TIMEOUT))
        );
    }

    #[test]
    fn cluster_nodes_keep_the_credentials() {
        assert_eq!(
            with_host("redis://u:p@127.0.0.1:7000", "127.0.0.1:7001"),
            "redis://u:p@127.0.0.1:7001"
        );
        assert_eq!(
            with_host("redis://127.0.0.1:7000", "10.0.0.2:7001"),
            "redis://10.0.0.2:7001"
        );
    }
}
