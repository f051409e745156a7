//! A report-export worker on the Hermes SQS driver: what the emitter, the worker and the
//! shutdown program share.
//!
//! The programs (`cargo run -p hermes-example-sqs --bin …`):
//! - `sqs-emit <report> [delay seconds] [high]` queues an export;
//! - `sqs-worker` runs exports until `sqs-shutdown`, SIGTERM or Ctrl-C;
//! - `sqs-shutdown` asks every running worker to stop (SQS has no shared key, so the workers
//!   watch a file, `$HERMES_DIR/shutdown`, as Hermes' `SharedFileShutdown`).
//!
//! Settings come from the environment: `HERMES_SQS_ENDPOINT` (default `http://127.0.0.1:4566`,
//! an SQS-compatible server such as moto; plain HTTP), `HERMES_SQS_QUEUE` (default `exports`;
//! the urgent queue is `<queue>_high`), `HERMES_DIR` (the export log and the shutdown file), and
//! the usual `AWS_REGION` (default `us-east-1`), `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`
//! (default test credentials, which a local server accepts). Against AWS itself, build the
//! client with `aws-config`'s default features, which bring its HTTPS client.

use std::collections::HashMap;
use std::path::PathBuf;

use hermes_core::{Driver as _, SharedFileShutdown};
pub use hermes_example_common::{ExportReport, Exporter, PRIORITY_HIGH, directory};
use hermes_sqs::aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use hermes_sqs::aws_sdk_sqs::types::QueueAttributeName;
use hermes_sqs::{SqsDriver, SqsOptions, aws_sdk_sqs};

/// The queue of normal exports.
pub fn queue() -> String {
    std::env::var("HERMES_SQS_QUEUE").unwrap_or_else(|_| "exports".to_owned())
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// An SQS client for `HERMES_SQS_ENDPOINT`, as an application builds one with `aws-config`.
pub async fn client() -> aws_sdk_sqs::Client {
    let credentials = Credentials::new(
        env_or("AWS_ACCESS_KEY_ID", "test"),
        env_or("AWS_SECRET_ACCESS_KEY", "test"),
        None,
        None,
        "example",
    );
    let config = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(env_or("AWS_REGION", "us-east-1")))
        .credentials_provider(credentials)
        .endpoint_url(env_or("HERMES_SQS_ENDPOINT", "http://127.0.0.1:4566"))
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .load()
        .await;
    aws_sdk_sqs::Client::new(&config)
}

/// The driver both sides use: the queue `<queue>`, and `<queue>_high` for urgent exports. An
/// export may run for up to a minute before SQS shows it to another worker; the worker extends
/// that while it runs.
///
/// # Errors
/// When a setting is invalid.
pub async fn driver() -> Result<SqsDriver, hermes_core::Error> {
    let queue = queue();
    let mut options = SqsOptions::default();
    options.queue_attributes =
        HashMap::from([(QueueAttributeName::VisibilityTimeout, "60".to_owned())]);
    let driver = SqsDriver::with_options(client().await, &queue, options)?;
    driver.setup_priority_queue(&format!("{queue}_high"), PRIORITY_HIGH)?;
    Ok(driver)
}

/// The shutdown file the workers watch.
pub fn shutdown_file() -> PathBuf {
    directory().join("shutdown")
}

/// The shutdown signal the workers watch.
pub fn shutdown() -> SharedFileShutdown {
    SharedFileShutdown::new(shutdown_file())
}
