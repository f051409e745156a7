//! A report-export worker on the Hermes filesystem driver: what the emitter, the worker and the
//! shutdown program share.
//!
//! The programs (`cargo run -p hermes-example-filesystem --bin …`):
//! - `filesystem-emit <report> [delay seconds] [high]` queues an export;
//! - `filesystem-worker` runs exports until `filesystem-shutdown`, SIGTERM or Ctrl-C;
//! - `filesystem-shutdown` asks every running worker to stop.
//!
//! `e2e.sh` runs the whole flow and checks it. Settings come from the environment:
//! `HERMES_DIR` (the queue directory, default `var/hermes`), `HERMES_VISIBILITY_TIMEOUT`
//! (seconds, default 300).

use std::path::{Path, PathBuf};
use std::time::Duration;

use hermes_core::Driver as _;
pub use hermes_example_common::{ExportReport, Exporter, PRIORITY_HIGH, directory};
use hermes_fs::{FileSystemDriver, FileSystemOptions};

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
