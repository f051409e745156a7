//! The Redis driver's URL: `redis://127.0.0.1:6379/0?key=hermes`, read into the client
//! library, the server or cluster and the options it names.

use hermes_core::Error;
use hermes_core::driver::DriverUrl;

use crate::naming::Keys;
use crate::{DeliveryMode, RedisOptions};

/// The parameters a Redis URL takes.
const PARAMETERS: [&str; 13] = [
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
        let mut url = DriverUrl::parse(url, crate::NAME, &["redis", "rediss", "redis+cluster"])?;
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
            if url.scheme() == "redis" {
                return Err(url.error("tls_ca is for rediss:// URLs"));
            }
            options.tls_ca = Some(ca.into());
        }
        let client = url.take("client").unwrap_or_else(|| "redis".to_owned());
        let cluster = url.scheme() == "redis+cluster";
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
        let target = if cluster {
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
