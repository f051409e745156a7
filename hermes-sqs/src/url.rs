//! The SQS driver's URL: `sqs://hermes?region=eu-west-1`.

use hermes_core::Error;
use hermes_core::driver::DriverUrl;

use crate::naming::{MAX_DEFAULT_QUEUE_NAME_LEN, validate_sqs_queue_name};
use crate::{NAME, SqsOptions};

/// The parameters an `sqs://` URL takes.
const PARAMETERS: [&str; 9] = [
    "endpoint",
    "region",
    "wait_time",
    "visibility_timeout",
    "batch_size",
    "max_delay",
    "max_payload",
    "retention_count",
    "retention_age",
];

/// An `sqs://` URL read, before any client exists.
#[derive(Debug)]
pub(crate) struct SqsUrl {
    /// The default queue's name: the host.
    pub(crate) queue: String,
    /// The server, when not AWS's for the region.
    pub(crate) endpoint: Option<String>,
    /// The region, when the URL gives it.
    pub(crate) region: Option<String>,
    pub(crate) options: SqsOptions,
}

impl SqsUrl {
    /// Reads `text`; see [`SqsDriver::from_url`](crate::SqsDriver::from_url).
    ///
    /// # Errors
    /// [`Error::Config`] for a URL of another scheme, without a queue, with a port, path or
    /// credentials, with an unknown parameter or a bad value; [`Error::InvalidQueueName`] for a
    /// queue name SQS does not take.
    pub(crate) fn parse(text: &str) -> Result<Self, Error> {
        let mut url = DriverUrl::parse(text, NAME, &["sqs"])?;
        let queue = match url.host() {
            Some(host) if !host.is_empty() => host.to_owned(),
            _ => return Err(url.error("an sqs:// URL names its queue as the host: sqs://hermes")),
        };
        if url.port().is_some() || !matches!(url.path()?.as_str(), "" | "/") {
            return Err(url.error(
                "an sqs:// URL is sqs://<queue>; give the server as endpoint=http://host:port",
            ));
        }
        if url.username().is_some() || url.password().is_some() {
            return Err(url.error(
                "an sqs:// URL holds no credentials: they come from the AWS default chain \
                 (environment, profile, role)",
            ));
        }
        let endpoint = url.take("endpoint");
        if let Some(endpoint) = &endpoint
            && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        {
            return Err(url.error("endpoint is an http:// or https:// URL"));
        }
        let region = url.take("region");
        if let Some(region) = &region
            && (region.is_empty()
                || !region
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
        {
            return Err(url.error("region is an AWS region name, such as eu-west-1"));
        }
        let mut options = SqsOptions::default();
        if let Some(wait) = url.take_seconds("wait_time")? {
            options.wait_time = wait;
        }
        options.visibility_timeout = url.take_seconds("visibility_timeout")?;
        if let Some(size) = url.take_parsed("batch_size", "a number from 1 to 10")? {
            options.batch_size = size;
        }
        if let Some(delay) = url.take_seconds("max_delay")? {
            options.max_delay = delay;
        }
        if let Some(bytes) = url.take_parsed("max_payload", "a number of bytes")? {
            options.max_payload = bytes;
        }
        if let Some(count) = url.take_parsed("retention_count", "a number of dead letters")? {
            options.retention.max_count = count;
        }
        if let Some(age) = url.take_seconds("retention_age")? {
            options.retention.max_age = age;
        }
        url.finish(&PARAMETERS)?;
        validate_sqs_queue_name(&queue, MAX_DEFAULT_QUEUE_NAME_LEN)?;
        options.validate()?;
        Ok(SqsUrl {
            queue,
            endpoint,
            region,
            options,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn parameters_are_read_and_mistakes_named() {
        let url = SqsUrl::parse(
            "sqs://exports?endpoint=http%3A%2F%2F127.0.0.1%3A4566&region=us-east-1&wait_time=20\
             &visibility_timeout=30&batch_size=5&max_delay=600&max_payload=1000\
             &retention_count=50&retention_age=86400",
        )
        .unwrap();
        assert_eq!(url.queue, "exports");
        assert_eq!(url.endpoint.as_deref(), Some("http://127.0.0.1:4566"));
        assert_eq!(url.region.as_deref(), Some("us-east-1"));
        let options = &url.options;
        assert_eq!(options.wait_time, Duration::from_secs(20));
        assert_eq!(options.visibility_timeout, Some(Duration::from_secs(30)));
        assert_eq!(options.batch_size, 5);
        assert_eq!(options.max_delay, Duration::from_secs(600));
        assert_eq!(options.max_payload, 1000);
        assert_eq!(options.retention.max_count, 50);
        assert_eq!(options.retention.max_age, Duration::from_secs(86_400));

        let plain = SqsUrl::parse("sqs://hermes").unwrap();
        assert_eq!((plain.endpoint, plain.region), (None, None));
        assert_eq!(plain.options.wait_time, SqsOptions::default().wait_time);
        assert_eq!(plain.options.visibility_timeout, None);

        for (url, says) in [
            ("redis://hermes", "sqs://"),
            ("sqs://", "host"),
            ("sqs://hermes:4566", "endpoint="),
            ("sqs://hermes/more", "endpoint="),
            ("sqs://key:s3cret@hermes", "no credentials"),
            ("sqs://hermes?colour=red", "unknown parameter"),
            ("sqs://hermes?endpoint=127.0.0.1:4566", "http://"),
            ("sqs://hermes?region=EU%20West", "region"),
            ("sqs://hermes?wait_time=30", "wait_time"),
            ("sqs://hermes?wait_time=-1", "seconds"),
            ("sqs://hermes?batch_size=11", "batch_size"),
            ("sqs://hermes?max_delay=901", "max_delay"),
            ("sqs://hermes?retention_count=0", "max_count"),
            ("sqs://hermes?max_payload=big", "bytes"),
        ] {
            let err = SqsUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(says), "{url}: {err}");
            assert!(!err.contains("s3cret"), "{url}: {err}");
        }
        assert!(matches!(
            SqsUrl::parse("sqs://a.fifo").unwrap_err(),
            Error::InvalidQueueName { .. }
        ));
    }
}
