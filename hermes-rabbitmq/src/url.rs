//! The RabbitMQ driver's URL: `amqp://guest:guest@127.0.0.1:5672/%2f?queue=hermes`.

use hermes_core::Error;
use hermes_core::driver::DriverUrl;

use crate::nodes::at_host;
use crate::{NAME, QueueType, RabbitMqDriver, RabbitMqOptions, UndecodableAction};

/// The parameters [`RabbitMqDriver::from_url`] takes.
const PARAMETERS: [&str; 10] = [
    "queue",
    "prefetch",
    "durable",
    "queue_type",
    "fallback",
    "consumer_tag",
    "undecodable",
    "refresh_interval",
    "retention_count",
    "retention_age",
];

impl RabbitMqDriver {
    /// A driver from an AMQP URL, as the `hermes` command and programs that take their queue
    /// from the environment use: `amqp://` or `amqps://`, user, password, host, port and
    /// virtual host as the broker's URI spec has them (`/%2f` is the virtual host `/`), and
    /// these parameters, all optional:
    ///
    /// | parameter | meaning | default |
    /// |---|---|---|
    /// | `queue` | the queue of the default priority | `hermes` |
    /// | `prefetch` | [`RabbitMqOptions::prefetch`], 1 to 65535 | 1 |
    /// | `durable` | [`RabbitMqOptions::durable`], `true` or `false` | `true` |
    /// | `queue_type` | [`RabbitMqOptions::queue_type`]: `classic` or `quorum` | `classic` |
    /// | `fallback` | other nodes of the cluster, `host:port` separated by commas, with the same user and virtual host ([`with_fallback_urls`](RabbitMqDriver::with_fallback_urls)) | none |
    /// | `consumer_tag` | [`RabbitMqOptions::consumer_tag`] | `hermes` |
    /// | `undecodable` | [`RabbitMqOptions::undecodable`]: `quarantine` or `reject` | `quarantine` |
    /// | `refresh_interval` | [`RabbitMqOptions::refresh_interval`], in seconds | 0.1 |
    /// | `retention_count` | the dead letters kept per queue ([`RabbitMqOptions::retention`]) | 10000 |
    /// | `retention_age` | their longest age, in seconds | 15552000 (180 days) |
    ///
    /// A `%XX` escape in a value stands for that byte. The URL without its parameters is what
    /// the client library connects to. Nothing connects until first use. An `amqps://` URL
    /// needs lapin built with a TLS backend (its `rustls` feature, say); without one the
    /// connection fails.
    ///
    /// ```
    /// use hermes_rabbitmq::RabbitMqDriver;
    ///
    /// let driver = RabbitMqDriver::from_url("amqp://guest:guest@127.0.0.1:5672/%2f?queue=exports&prefetch=16")?;
    /// assert_eq!(driver.quarantine_queue(), "exports.quarantine");
    /// let err = RabbitMqDriver::from_url("amqp://guest:s3cret@127.0.0.1/%2f?colour=red").unwrap_err();
    /// assert!(err.to_string().contains("colour") && !err.to_string().contains("s3cret"));
    /// # Ok::<(), hermes_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] for a URL of another scheme, without a host, with an unknown
    /// parameter or a bad value; [`Error::InvalidQueueName`] for a bad queue name. No error
    /// shows the password.
    pub fn from_url(url: &str) -> Result<Self, Error> {
        let mut url = DriverUrl::parse(url, NAME, &["amqp", "amqps"])?;
        if url.host().is_none_or(str::is_empty) {
            return Err(
                url.error("an AMQP URL names the broker's host (amqp://127.0.0.1:5672/%2f)")
            );
        }
        let queue = url.take("queue").unwrap_or_else(|| "hermes".to_owned());
        let mut options = RabbitMqOptions::default();
        if let Some(prefetch) = url.take_parsed("prefetch", "a whole number from 1 to 65535")? {
            options.prefetch = prefetch;
        }
        if let Some(durable) = url.take_bool("durable")? {
            options.durable = durable;
        }
        if let Some(queue_type) = url.take("queue_type") {
            options.queue_type = [QueueType::Classic, QueueType::Quorum]
                .into_iter()
                .find(|known| known.as_str() == queue_type)
                .ok_or_else(|| url.error("queue_type is classic or quorum"))?;
        }
        if let Some(tag) = url.take("consumer_tag") {
            options.consumer_tag = tag;
        }
        if let Some(action) = url.take("undecodable") {
            options.undecodable = match action.as_str() {
                "quarantine" => UndecodableAction::Quarantine,
                "reject" => UndecodableAction::Reject,
                _ => return Err(url.error("undecodable is quarantine or reject")),
            };
        }
        if let Some(interval) = url.take_seconds("refresh_interval")? {
            options.refresh_interval = interval;
        }
        if let Some(count) = url.take_parsed("retention_count", "a whole number")? {
            options.retention.max_count = count;
        }
        if let Some(age) = url.take_seconds("retention_age")? {
            options.retention.max_age = age;
        }
        let fallback = url.take("fallback");
        let address = url.without_query();
        url.finish(&PARAMETERS)?;
        let driver = RabbitMqDriver::new(&address, &queue, options)?;
        Ok(match fallback {
            Some(nodes) => driver.with_fallback_urls(
                nodes
                    .split(',')
                    .map(str::trim)
                    .filter(|node| !node.is_empty())
                    .map(|node| at_host(&address, node)),
            ),
            None => driver,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn parameters_are_read_and_mistakes_named_without_the_password() {
        let driver = RabbitMqDriver::from_url(
            "amqps://user:p%40ss@broker.example:5671/jobs?queue=exports&prefetch=16&durable=false\
             &consumer_tag=worker%201&undecodable=reject&refresh_interval=0.5\
             &retention_count=50&retention_age=3600",
        )
        .unwrap();
        let options = &driver.inner.options;
        assert_eq!(driver.inner.queue, "exports");
        assert_eq!(options.prefetch, 16);
        assert!(!options.durable);
        assert_eq!(options.consumer_tag, "worker 1");
        assert_eq!(options.undecodable, UndecodableAction::Reject);
        assert_eq!(options.refresh_interval, Duration::from_millis(500));
        assert_eq!(options.retention.max_count, 50);
        assert_eq!(options.retention.max_age, Duration::from_secs(3600));
        let shown = format!("{driver:?}");
        assert!(
            shown.contains("amqps://user:***@broker.example:5671/jobs"),
            "{shown}"
        );
        assert!(
            !shown.contains("p%40ss") && !shown.contains("queue="),
            "{shown}"
        );

        let defaults = RabbitMqDriver::from_url("amqp://127.0.0.1/%2f").unwrap();
        assert_eq!(defaults.inner.queue, "hermes");
        assert_eq!(defaults.inner.options.prefetch, 1);
        assert!(defaults.inner.options.durable);
        assert_eq!(defaults.inner.options.queue_type, QueueType::Classic);
        let quorum = RabbitMqDriver::from_url(
            "amqp://u:secret-pw@a:5681/%2f?queue_type=quorum&fallback=b:5682,%20c:5683",
        )
        .unwrap();
        let shown = format!("{quorum:?}");
        assert!(
            shown.contains(r#"["amqp://u:***@a:5681/%2f", "amqp://u:***@b:5682/%2f", "amqp://u:***@c:5683/%2f"]"#),
            "{shown}"
        );
        assert_eq!(quorum.inner.options.queue_type, QueueType::Quorum);

        for (url, says) in [
            ("redis://:secret-pw@x", "amqp://"),
            ("amqp://:secret-pw@/%2f", "host"),
            ("amqp://u:secret-pw@h/%2f?colour=red", "unknown parameter"),
            ("amqp://u:secret-pw@h/%2f?prefetch=0", "prefetch"),
            ("amqp://u:secret-pw@h/%2f?prefetch=70000", "prefetch"),
            ("amqp://u:secret-pw@h/%2f?durable=yes", "true or false"),
            (
                "amqp://u:secret-pw@h/%2f?queue_type=stream",
                "classic or quorum",
            ),
            (
                "amqp://u:secret-pw@h/%2f?queue_type=quorum&durable=false",
                "durable",
            ),
            (
                "amqp://u:secret-pw@h/%2f?undecodable=drop",
                "quarantine or reject",
            ),
            ("amqp://u:secret-pw@h/%2f?refresh_interval=-1", "seconds"),
            (
                "amqp://u:secret-pw@h/%2f?retention_count=many",
                "whole number",
            ),
            ("amqp://u:secret-pw@h/%2f?queue=amq.x", "amq."),
            ("amqp://u:secret-pw@h/%2f?queue=..%2fup", "queue"),
        ] {
            let err = RabbitMqDriver::from_url(url).unwrap_err();
            let text = format!("{err} {err:?}");
            assert!(text.contains(says), "{url}: {text}");
            assert!(!text.contains("secret-pw"), "{url}: {text}");
        }
    }
}
