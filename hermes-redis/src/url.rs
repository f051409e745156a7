//! The Redis driver's URL: `redis://127.0.0.1:6379/0?key=hermes`.

use hermes_core::Error;
use hermes_core::driver::DriverUrl;

use crate::{DeliveryMode, RedisOptions, RedisSetDriver};

/// The parameters a Redis URL takes.
const PARAMETERS: [&str; 11] = [
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
    "nodes",
];

impl RedisSetDriver {
    /// Connects to the queue a URL names, as the `hermes` command and programs that take their
    /// queue from the environment do:
    ///
    /// - `redis://[user:password@]host:port[/db]` (or `rediss://`) for one server;
    /// - `redis+cluster://host:port?hash_tag=T` for a Redis Cluster, found through that node
    ///   (`nodes=host:port,host:port` adds more). A cluster needs `hash_tag`, so that every key
    ///   of the queue lives in one slot.
    ///
    /// Parameters, all optional, with the defaults of [`RedisOptions`]: `key` (`hermes`),
    /// `schedule_key` (`hermes_schedule`), `hash_tag`, `client` (`redis` for the `redis` crate,
    /// `fred` for `fred`), `delivery` (`at-least-once` or `at-most-once`),
    /// `visibility_timeout` and `refresh_interval` (seconds), `prefetch` (a count),
    /// `deferred_acks` and `wake_ups` (`true` or `false`).
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), hermes_core::Error> {
    /// use hermes_redis::RedisSetDriver;
    ///
    /// let driver = RedisSetDriver::from_url("redis://127.0.0.1:6379/0?key=hermes&client=fred").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] for a URL of another scheme, an unknown parameter, a bad value, a
    /// client library this build leaves out, or a cluster URL without `hash_tag`;
    /// [`Error::InvalidQueueName`] for bad key names; connection errors as `connect_*`. No
    /// error shows the password.
    pub async fn from_url(url: &str) -> Result<Self, Error> {
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
        crate::naming::Keys::new(&options)?;
        if cluster {
            let first = target.replacen("redis+cluster://", "redis://", 1);
            let mut nodes_urls = vec![first];
            for node in nodes.iter().flat_map(|n| n.split(',')) {
                nodes_urls.push(with_host(&nodes_urls[0], node));
            }
            connect_cluster(&client, &nodes_urls, options).await
        } else {
            connect_one(&client, &target, options).await
        }
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

async fn connect_one(
    client: &str,
    url: &str,
    options: RedisOptions,
) -> Result<RedisSetDriver, Error> {
    match client {
        #[cfg(feature = "redis-rs")]
        "redis" => RedisSetDriver::connect_redis(url, options).await,
        #[cfg(feature = "fred")]
        "fred" => RedisSetDriver::connect_fred(url, options).await,
        other => {
            let _ = (url, options);
            Err(unknown_client(other))
        }
    }
}

async fn connect_cluster(
    client: &str,
    nodes: &[String],
    options: RedisOptions,
) -> Result<RedisSetDriver, Error> {
    match client {
        #[cfg(feature = "redis-rs")]
        "redis" => {
            let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
            RedisSetDriver::connect_redis_cluster(&nodes, options).await
        }
        #[cfg(feature = "fred")]
        "fred" => {
            let url = nodes[0].replacen("redis://", "redis-cluster://", 1);
            RedisSetDriver::connect_fred(&url, options).await
        }
        other => {
            let _ = (nodes, options);
            Err(unknown_client(other))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn mistakes_are_named_before_connecting_and_hide_the_password() {
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
            let err = RedisSetDriver::from_url(url).await.unwrap_err().to_string();
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
