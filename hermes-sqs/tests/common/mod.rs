//! Shared by the SQS driver's tests: the SQS-compatible server on loopback (moto), a plain SDK
//! client for it, and the conformance harness.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use hermes_core::{Error, async_trait};
use hermes_sqs::aws_sdk_sqs::config::{Credentials, Region};
use hermes_sqs::aws_sdk_sqs::types::QueueAttributeName;
use hermes_sqs::aws_sdk_sqs::{self, Client};
use hermes_sqs::{SqsDriver, SqsOptions, delay_queue, quarantine_queue};
use hermes_testkit::suite::Harness;

/// The visibility timeout of the test queues, in seconds (SQS counts whole seconds).
pub const VISIBILITY_SECONDS: u64 = 2;

/// The driver's bound on one call to SQS, beyond its long poll: a server that takes the
/// connection and never answers fails the call after this.
pub const CALL_LIMIT: Duration = Duration::from_secs(10);

/// The server the tests use: `HERMES_SQS_ENDPOINT`, default `http://127.0.0.1:4566` (moto).
/// Only a loopback address is accepted, so that no test ever reaches AWS.
pub fn endpoint() -> String {
    let endpoint =
        std::env::var("HERMES_SQS_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:4566".to_owned());
    assert!(
        ["http://127.0.0.1:", "http://localhost:", "http://[::1]:"]
            .iter()
            .any(|p| endpoint.starts_with(p)),
        "HERMES_SQS_ENDPOINT must be a loopback http:// address, not {endpoint}"
    );
    endpoint
}

/// An SDK client for the test server, built with `aws-config` as an application would, with
/// static test credentials, region us-east-1 and a plain-HTTP connector.
pub async fn client() -> Client {
    Client::new(&config().load().await)
}

/// A client for the test server as [`client`], with `interceptor` on its requests.
pub async fn client_with(interceptor: impl aws_sdk_sqs::config::Intercept + 'static) -> Client {
    let config = aws_sdk_sqs::config::Builder::from(&config().load().await)
        .interceptor(interceptor)
        .build();
    Client::from_conf(config)
}

fn config() -> aws_config::ConfigLoader {
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("AKIDTEST", "secret", None, None, "test"))
        .endpoint_url(endpoint())
        .http_client(aws_smithy_http_client::Builder::new().build_http())
}

/// `Ok` when the test server answers within 5 s.
pub async fn reachable() -> Result<(), String> {
    // One attempt: a server that is not there is reported at once.
    let client = Client::new(&config().retry_config(RetryConfig::disabled()).load().await);
    let answer = tokio::time::timeout(Duration::from_secs(5), client.list_queues().send()).await;
    match answer {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!(
            "the SQS server at {} failed: {}",
            endpoint(),
            aws_sdk_sqs::error::DisplayErrorContext(&e)
        )),
        Err(_) => Err(format!("no answer from {} within 5 s", endpoint())),
    }
}

/// For tests outside the suite: `false` (the test is skipped) when the server is not
/// reachable; a failure instead under `HERMES_TEST_STRICT=1`.
pub async fn sqs_or_skip() -> bool {
    let strict = hermes_testkit::suite::strict();
    hermes_testkit::suite::available_or_skip(strict, "SQS test", reachable().await)
}

/// The attributes of the test queues: a short visibility timeout.
pub fn attributes() -> HashMap<QueueAttributeName, String> {
    HashMap::from([(
        QueueAttributeName::VisibilityTimeout,
        VISIBILITY_SECONDS.to_string(),
    )])
}

/// The options of the test drivers.
pub fn options() -> SqsOptions {
    let mut options = SqsOptions::default();
    options.queue_attributes = attributes();
    options
}

/// Opens a driver on `queue` with `options`.
pub async fn open(queue: &str, options: SqsOptions) -> SqsDriver {
    SqsDriver::with_options(client().await, queue, options).expect("a valid driver")
}

/// The URL of the queue called `name`, creating it as the drivers do.
pub async fn queue_url(client: &Client, name: &str) -> String {
    client
        .create_queue()
        .queue_name(name)
        .set_attributes(Some(attributes()))
        .send()
        .await
        .expect("creating the queue")
        .queue_url
        .expect("a queue URL")
}

/// Takes up to `max` bodies (at most 10) off the existing queue called `queue` with the plain
/// SDK, as a PHP worker would, deleting them; waits up to 1 s for the first.
pub async fn take_raw(client: &Client, queue: &str, max: i32) -> Vec<String> {
    let url = client
        .get_queue_url()
        .queue_name(queue)
        .send()
        .await
        .expect("the queue exists")
        .queue_url
        .expect("a queue URL");
    let received = client
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(max)
        .wait_time_seconds(1)
        .send()
        .await
        .expect("receiving with the SDK");
    let mut bodies = Vec::new();
    for message in received.messages.unwrap_or_default() {
        client
            .delete_message()
            .queue_url(&url)
            .set_receipt_handle(message.receipt_handle)
            .send()
            .await
            .expect("deleting with the SDK");
        bodies.extend(message.body);
    }
    bodies
}

/// How many messages the queue called `name` holds (visible, claimed or delayed); 0 when it
/// does not exist.
pub async fn count(client: &Client, name: &str) -> usize {
    let Ok(found) = client.get_queue_url().queue_name(name).send().await else {
        return 0;
    };
    let url = found.queue_url.expect("a queue URL");
    let attributes = client
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .expect("reading the queue's attributes");
    let attributes = attributes.attributes().cloned().unwrap_or_default();
    [
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        QueueAttributeName::ApproximateNumberOfMessagesDelayed,
    ]
    .iter()
    .filter_map(|a| attributes.get(a)?.parse::<usize>().ok())
    .sum()
}

/// Deletes the queue called `name`, when it exists.
pub async fn delete_queue(client: &Client, name: &str) {
    if let Ok(found) = client.get_queue_url().queue_name(name).send().await
        && let Some(url) = found.queue_url
    {
        let _ = client.delete_queue().queue_url(url).send().await;
    }
}

/// Deletes every queue a test on `queue` may have created.
pub async fn cleanup(queue: &str) {
    let client = client().await;
    for name in [
        queue.to_owned(),
        format!("{queue}-high"),
        format!("{queue}-low"),
        quarantine_queue(queue),
        delay_queue(queue),
    ] {
        delete_queue(&client, &name).await;
    }
}

/// The conformance harness: each test has its own queues on the shared server. Moto handles
/// some tens of requests a second, so the bulk scenarios run with a quarter of their messages.
pub struct SqsHarness;

#[async_trait]
impl Harness for SqsHarness {
    type Driver = SqsDriver;

    async fn available(&self) -> Result<(), String> {
        reachable().await
    }

    async fn open(&self, queue: &str) -> Result<SqsDriver, Error> {
        SqsDriver::with_options(client().await, queue, options())
    }

    async fn open_with(
        &self,
        queue: &str,
        serializer: std::sync::Arc<dyn hermes_core::Serializer>,
    ) -> Result<SqsDriver, Error> {
        Ok(self.open(queue).await?.with_serializer(serializer))
    }

    async fn push_raw(&self, queue: &str, bytes: &[u8]) -> Result<(), Error> {
        let client = client().await;
        let url = queue_url(&client, queue).await;
        client
            .send_message()
            .queue_url(url)
            .message_body(String::from_utf8_lossy(bytes))
            .send()
            .await
            .expect("sending a raw message");
        Ok(())
    }

    /// The body is text: its UTF-8 bytes.
    async fn pull_raw(&self, queue: &str) -> Result<Option<Vec<u8>>, Error> {
        let body = take_raw(&client().await, queue, 1).await.pop();
        Ok(body.map(String::into_bytes))
    }

    /// An SQS body is non-empty text of the characters XML allows (carriage returns left out
    /// too: an XML reader may turn them into line feeds).
    fn carries_raw(&self, bytes: &[u8]) -> bool {
        std::str::from_utf8(bytes).is_ok_and(|text| {
            !text.is_empty()
                && text.chars().all(|c| {
                    matches!(c, '\t' | '\n' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}')
                        || c >= '\u{10000}'
                })
        })
    }

    /// Every message of the dead-letter queue `<queue>-quarantine`, where undecodable bodies
    /// and failed messages of all the priority queues are kept.
    async fn quarantined(&self, queue: &str) -> Result<usize, Error> {
        Ok(count(&client().await, &quarantine_queue(queue)).await)
    }

    fn visibility_timeout(&self) -> Duration {
        Duration::from_secs(VISIBILITY_SECONDS)
    }

    /// The server is at a fixed address: a copy of the test binary builds the same harness.
    fn environment_of_copies(&self) -> Option<Vec<(String, String)>> {
        Some(Vec::new())
    }

    fn scale(&self) -> f64 {
        0.25
    }

    async fn cleanup(&self, queue: &str) {
        cleanup(queue).await;
    }
}
