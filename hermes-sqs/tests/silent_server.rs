//! An SQS endpoint that takes the TCP connection and then never answers: every call fails within
//! its bound with a temporary error instead of hanging.

mod common;

use std::time::{Duration, Instant};

use common::CALL_LIMIT;
use hermes_core::inspect::{QueueState, Replay};
use hermes_core::{DEFAULT_PRIORITY, Driver, Message};
use hermes_sqs::aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use hermes_sqs::{SqsDriver, SqsOptions, aws_sdk_sqs};
use hermes_testkit::silent_port;

async fn silent_client() -> aws_sdk_sqs::Client {
    let config = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .endpoint_url(format!("http://127.0.0.1:{}", silent_port()))
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .load()
        .await;
    aws_sdk_sqs::Client::new(&config)
}

async fn within<T>(what: &str, bound: Duration, call: impl Future<Output = T>) -> T {
    let started = Instant::now();
    let result = tokio::time::timeout(bound * 3, call)
        .await
        .unwrap_or_else(|_| panic!("{what} hung on an endpoint that never answers"));
    let took = started.elapsed();
    assert!(took <= bound, "{what} took {took:?}");
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_to_a_silent_endpoint_fail_within_their_bound() {
    let driver =
        SqsDriver::with_options(silent_client().await, "silent", SqsOptions::default()).unwrap();
    let bound = CALL_LIMIT + Duration::from_secs(2);
    let message = Message::builder("job").build().unwrap();
    let sent = within("send", bound, driver.send(&message, DEFAULT_PRIORITY)).await;
    assert!(sent.expect_err("nothing was sent").is_temporary());
    // Each receive returns within its wait; the long poll's failure shows within its own
    // bound (the poll's wait plus the timeout).
    let started = Instant::now();
    let wait = Duration::from_secs(1);
    let error = loop {
        match within(
            "receive",
            wait + Duration::from_secs(1),
            driver.receive(&[], wait),
        )
        .await
        {
            Ok(None) => assert!(started.elapsed() < bound * 2, "no error yet"),
            Ok(Some(_)) => panic!("a message from nowhere"),
            Err(e) => break e,
        }
    };
    assert!(error.is_temporary(), "{error:?}");
    assert!(
        error.to_string().contains("got no answer within"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspection_on_a_silent_endpoint_fails_within_its_bound() {
    let driver =
        SqsDriver::with_options(silent_client().await, "silent", SqsOptions::default()).unwrap();
    let bound = CALL_LIMIT + Duration::from_secs(2);
    let stats = within("stats", bound, driver.inspect().unwrap().stats()).await;
    let error = stats.expect_err("no figures from nowhere");
    assert!(error.is_temporary(), "{error:?}");
    assert!(
        error.to_string().contains("got no answer within"),
        "{error}"
    );
    let listed = within(
        "dead_letters",
        bound,
        driver.dead_letters().unwrap().list(DEFAULT_PRIORITY, 10),
    )
    .await;
    assert!(listed.expect_err("no letters from nowhere").is_temporary());
    let replayed = within(
        "replay",
        bound,
        driver
            .dead_letters()
            .unwrap()
            .replay(DEFAULT_PRIORITY, &Replay::all()),
    )
    .await;
    assert!(replayed.expect_err("nothing replayed").is_temporary());
    let purged = within(
        "purge",
        bound,
        driver
            .inspect()
            .unwrap()
            .purge(DEFAULT_PRIORITY, QueueState::Waiting),
    )
    .await;
    assert!(purged.expect_err("nothing purged").is_temporary());
}
