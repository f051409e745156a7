//! A report-export worker on the Hermes filesystem driver: what the emitter, the worker and the
//! shutdown program share.
//!
//! The programs (`cargo run -p hermes-example-filesystem --bin …`):
//! - `filesystem-emit <report> [delay seconds] [high]` queues an export;
//! - `filesystem-worker` runs exports until `filesystem-shutdown`, SIGTERM or Ctrl-C;
//! - `filesystem-shutdown` asks every running worker to stop.
//!
//! `e2e.sh` runs the whole flow and checks it. Settings come from the environment:
//! `HERMES_DIR` (default `var/hermes`), `HERMES_VISIBILITY_TIMEOUT` (seconds, default 300).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hermes_core::{
    DEFAULT_PRIORITY, Driver as _, Handler, HandlerError, Message, Priority, RetryPolicy,
    async_trait,
};
use hermes_fs::{FileSystemDriver, FileSystemOptions};

/// The priority of urgent exports.
pub const PRIORITY_HIGH: Priority = DEFAULT_PRIORITY + 10;

/// The message type of an export.
pub const EXPORT: &str = "report.export";

/// The directory holding the queues, the shutdown file and the export log.
pub fn directory() -> PathBuf {
    std::env::var_os("HERMES_DIR").map_or_else(|| PathBuf::from("var/hermes"), PathBuf::from)
}

/// The driver both sides use: queue `exports`, and `exports_high` for urgent exports.
///
/// # Errors
/// When a setting is invalid.
pub fn driver(directory: &Path) -> Result<FileSystemDriver, hermes_core::Error> {
    let mut options = FileSystemOptions::default();
    if let Some(seconds) = std::env::var("HERMES_VISIBILITY_TIMEOUT")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
    {
        options.visibility_timeout = Duration::from_secs_f64(seconds);
    }
    let driver = FileSystemDriver::with_options(directory, "exports", options)?;
    driver.setup_priority_queue("exports_high", PRIORITY_HIGH)?;
    Ok(driver)
}

/// The shutdown file the worker watches.
pub fn shutdown_file(directory: &Path) -> PathBuf {
    directory.join("shutdown")
}

/// An export message for `report`.
///
/// # Errors
/// Never for a plain name; kept fallible like every message builder.
pub fn export(report: &str, delay: Duration) -> Result<Message, hermes_core::Error> {
    let mut builder = Message::builder(EXPORT).payload(&serde_json::json!({ "report": report }));
    if !delay.is_zero() {
        builder = builder.delay(delay);
    }
    builder.build()
}

/// Runs an export: takes `seconds` from the payload (a slow report), then appends
/// `<unix time> <report> exported` to the export log.
#[derive(Debug, Clone)]
pub struct ExportHandler {
    log: PathBuf,
}

impl ExportHandler {
    /// A handler writing to the log file `log`.
    pub fn new(log: impl Into<PathBuf>) -> Self {
        ExportHandler { log: log.into() }
    }
}

#[derive(serde::Deserialize)]
struct Export {
    report: String,
    #[serde(default)]
    seconds: f64,
}

#[async_trait]
impl Handler for ExportHandler {
    async fn handle(&self, message: &Message) -> Result<bool, HandlerError> {
        let export: Export = message.payload_as()?;
        if export.seconds > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(export.seconds)).await;
        }
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        writeln!(
            log,
            "{:.3} {} exported",
            hermes_core::time::unix_now(),
            export.report
        )?;
        println!("exported {}", export.report);
        Ok(true)
    }

    fn retry_policy(&self) -> Option<RetryPolicy> {
        Some(RetryPolicy::default())
    }

    fn name(&self) -> std::borrow::Cow<'static, str> {
        "ExportHandler".into()
    }
}

/// Logs to standard error at info level (override with `RUST_LOG`).
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
}
