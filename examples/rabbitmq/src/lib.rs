//! A report-export worker on the Hermes RabbitMQ driver: what the emitter, the worker and the
//! shutdown program share.
//!
//! The programs (`cargo run -p hermes-example-rabbitmq --bin …`):
//! - `rabbitmq-emit <report> [delay seconds] [high]` queues an export;
//! - `rabbitmq-worker` runs exports until `rabbitmq-shutdown`, SIGTERM or Ctrl-C;
//! - `rabbitmq-shutdown` asks every running worker to stop (RabbitMQ has no shared key, so the
//!   workers watch a file, `$HERMES_DIR/shutdown`, as Hermes' `SharedFileShutdown`).
//!
//! Settings come from the environment: `HERMES_AMQP_URL` (default
//! `amqp://guest:guest@127.0.0.1:5672/%2f`), `HERMES_RABBITMQ_QUEUE` (default `exports`; the
//! urgent queue is `<queue>_high`), `HERMES_DIR` (the export log and the shutdown file).

use std::path::PathBuf;

use hermes_core::{Driver as _, SharedFileShutdown};
pub use hermes_example_common::{ExportReport, Exporter, PRIORITY_HIGH, directory};
use hermes_rabbitmq::{RabbitMqDriver, RabbitMqOptions};

/// The queue of normal exports.
pub fn queue() -> String {
    std::env::var("HERMES_RABBITMQ_QUEUE").unwrap_or_else(|_| "exports".to_owned())
}

/// The driver both sides use: the queue `<queue>`, and `<queue>_high` for urgent exports.
///
/// # Errors
/// When a setting is invalid.
pub fn driver() -> Result<RabbitMqDriver, hermes_core::Error> {
    let url = std::env::var("HERMES_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    let queue = queue();
    let driver = RabbitMqDriver::new(&url, &queue, RabbitMqOptions::default())?;
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
