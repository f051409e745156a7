//! The RabbitMQ driver's URL: `amqp://guest:guest@127.0.0.1:5672/%2f?queue=hermes`.

use hermes_core::Error;
use hermes_core::driver::DriverUrl;

use crate::amqp::at_host;
use crate::{NAME, QueueType, RabbitMqOptions, UndecodableAction};

/// The parameters [`RabbitMqDriver::from_url`](crate::RabbitMqDriver::from_url) takes.
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

/// What an AMQP URL says: the address to connect to, the default queue's name, the options,
/// and the other nodes of the cluster when it names them.
#[derive(Debug)]
pub(crate) struct UrlConfig {
    /// The URL without its parameters: what the client library connects to.
    pub(crate) address: String,
    pub(crate) queue: String,
    pub(crate) options: RabbitMqOptions,
    /// The URLs of the other nodes (`fallback`), with the address's user and virtual host.
    pub(crate) fallback: Option<Vec<String>>,
}

impl UrlConfig {
    /// Reads `url`; see [`RabbitMqDriver::from_url`](crate::RabbitMqDriver::from_url). The
    /// queue name and the options are checked when the driver is made.
    ///
    /// # Errors
    /// [`Error::Config`] for a URL of another scheme, without a host, with an unknown
    /// parameter or a bad value. No error shows the password.
    pub(crate) fn parse(url: &str) -> Result<Self, Error> {
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
        let fallback = fallback.map(|nodes| {
            nodes
                .split(',')
                .map(str::trim)
                .filter(|node| !node.is_empty())
                .map(|node| at_host(&address, node))
                .collect()
        });
        Ok(UrlConfig {
            address,
            queue,
            options,
            fallback,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::amqp::Nodes;

    #[test]
    fn parameters_are_read_and_mistakes_named_without_the_password() {
        let config = UrlConfig::parse(
            "amqps://user:p%40ss@broker.example:5671/jobs?queue=exports&prefetch=16&durable=false\
             &consumer_tag=worker%201&undecodable=reject&refresh_interval=0.5\
             &retention_count=50&retention_age=3600",
        )
        .unwrap();
        let options = &config.options;
        assert_eq!(config.queue, "exports");
        assert_eq!(
            config.address,
            "amqps://user:p%40ss@broker.example:5671/jobs"
        );
        assert_eq!(options.prefetch, 16);
        assert!(!options.durable);
        assert_eq!(options.consumer_tag, "worker 1");
        assert_eq!(options.undecodable, UndecodableAction::Reject);
        assert_eq!(options.refresh_interval, Duration::from_millis(500));
        assert_eq!(options.retention.max_count, 50);
        assert_eq!(options.retention.max_age, Duration::from_secs(3600));
        assert!(config.fallback.is_none());

        let defaults = UrlConfig::parse("amqp://127.0.0.1/%2f").unwrap();
        assert_eq!(defaults.queue, "hermes");
        assert_eq!(defaults.options.prefetch, 1);
        assert!(defaults.options.durable);
        assert_eq!(defaults.options.queue_type, QueueType::Classic);
        let quorum = UrlConfig::parse(
            "amqp://u:secret-pw@a:5681/%2f?queue_type=quorum&fallback=b:5682,%20c:5683",
        )
        .unwrap();
        assert_eq!(quorum.options.queue_type, QueueType::Quorum);
        let fallback = quorum.fallback.unwrap();
        assert_eq!(
            fallback,
            [
                "amqp://u:secret-pw@b:5682/%2f",
                "amqp://u:secret-pw@c:5683/%2f"
            ]
        );
        let shown = format!("{:?}", Nodes::new(&quorum.address).and(fallback));
        assert!(
            shown.contains(r#"["amqp://u:***@a:5681/%2f", "amqp://u:***@b:5682/%2f", "amqp://u:***@c:5683/%2f"]"#),
            "{shown}"
        );

        for (url, says) in [
            ("redis://:secret-pw@x", "amqp://"),
            ("amqp://:secret-pw@/%2f", "host"),
            ("amqp://u:secret-pw@h/%2f?colour=red", "unknown parameter"),
            ("amqp://u:secret-pw@h/%2f?prefetch=70000", "prefetch"),
            ("amqp://u:secret-pw@h/%2f?durable=yes", "true or false"),
            (
                "amqp://u:secret-pw@h/%2f?queue_type=stream",
                "classic or quorum",
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
        ] {
            let err = UrlConfig::parse(url).unwrap_err();
            let text = format!("{err} {err:?}");
            assert!(text.contains(says), "{url}: {text}");
            assert!(!text.contains("secret-pw"), "{url}: {text}");
        }
    }
}
