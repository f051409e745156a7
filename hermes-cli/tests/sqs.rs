//! The `hermes` command on SQS (moto on loopback): the table and JSON outputs, each command's
//! effect seen through the driver, and a server that does not answer.

mod common;

use std::sync::Arc;

use common::{Target, dead_letters_round_trip, emit_stats_and_purge};
use hermes::sqs::SqsDriver;

fn endpoint() -> String {
    let endpoint =
        std::env::var("HERMES_SQS_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:4566".to_owned());
    assert!(
        endpoint.starts_with("http://127.0.0.1") || endpoint.starts_with("http://localhost"),
        "HERMES_SQS_ENDPOINT must be on loopback, not {endpoint}"
    );
    endpoint
}

/// Test credentials, and no look-up anywhere but the environment.
fn env() -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ACCESS_KEY_ID", "AKIDTEST".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "secret".to_owned()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ("AWS_CONFIG_FILE", "/nonexistent/hermes-test".to_owned()),
        (
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/hermes-test".to_owned(),
        ),
    ]
}

/// The driver the test itself uses, built as the SQS driver's tests build theirs.
async fn target(queue: &str) -> Target {
    let url = format!(
        "sqs://{queue}?endpoint={}&region=us-east-1&wait_time=1",
        endpoint()
    );
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(endpoint())
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "AKIDTEST", "secret", None, None, "test",
        ))
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .load()
        .await;
    let mut options = hermes::sqs::SqsOptions::default();
    options.wait_time = std::time::Duration::from_secs(1);
    let driver =
        SqsDriver::with_options(aws_sdk_sqs::Client::new(&config), queue, options).unwrap();
    Target {
        url,
        env: env(),
        driver: Arc::new(driver),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emit_stats_and_purge_on_sqs() {
    let queue = hermes_testkit::suite::unique_queue_name("cli-stats");
    emit_stats_and_purge(&target(&queue).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_round_trip_on_sqs() {
    let queue = hermes_testkit::suite::unique_queue_name("cli-dead");
    dead_letters_round_trip(&target(&queue).await, "d-1").await;
}

#[test]
fn a_server_that_does_not_answer_fails_in_time() {
    let port = common::silent_port();
    common::unanswered_backend_fails_in_time(
        &format!("sqs://q?endpoint=http://127.0.0.1:{port}&region=us-east-1"),
        &env(),
        "secret",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_has_no_live_workers_and_says_so() {
    let queue = hermes_testkit::suite::unique_queue_name("cli-workers");
    common::workers_are_listed(&target(&queue).await).await;
}
