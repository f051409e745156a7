//! The report-export example: a web process queues report exports, workers run them. One
//! program of each kind serves every backend; the queue is the URL in `HERMES_URL`.
//!
//! The programs (`cargo run -p hermes-example --bin …`):
//! - `emit <report> [delay seconds] [high]` queues an export;
//! - `worker` runs exports until `shutdown`, SIGTERM or Ctrl-C, and emits the nightly export;
//! - `shutdown` asks every running worker to stop.
//!
//! Settings come from the environment:
//! - `HERMES_URL`: the queue, any URL the `hermes` crate reads (default
//!   `file://<HERMES_DIR>?queue=exports`, a directory: no broker needed);
//! - `HERMES_URGENT_QUEUE`: the queue of urgent exports (default `exports_high`);
//! - `HERMES_DIR`: where the export log goes, and the shutdown file of brokers without a shared
//!   key (default `var/hermes`);
//! - `HERMES_METRICS_LISTEN`: an address to serve the worker's metrics at (`/metrics`);
//! - `HERMES_EXPORT_SCHEDULE`, `HERMES_EXPORT_ZONE`: the nightly export's cron expression and
//!   time zone (default `0 3 * * *` in UTC).
//!
//! `examples/e2e.sh <backend>` runs the whole flow on a backend and checks it.

mod job;
mod observe;
mod schedule;
pub mod testing;

use std::path::PathBuf;
use std::time::Duration;

use hermes::{AnyDriver, Connect, DEFAULT_PRIORITY, Emitter, Priority, SharedFileShutdown};

pub use job::{ExportReport, Exporter};
pub use observe::{exit_status, init_logging, init_metrics};
pub use schedule::nightly_export;

/// The priority of urgent exports.
pub const PRIORITY_HIGH: Priority = DEFAULT_PRIORITY + 10;

/// The example's working directory: `HERMES_DIR`, default `var/hermes`, as an absolute path.
pub fn directory() -> PathBuf {
    let dir =
        std::env::var_os("HERMES_DIR").map_or_else(|| PathBuf::from("var/hermes"), PathBuf::from);
    std::path::absolute(&dir).unwrap_or(dir)
}

/// The queue's URL: `HERMES_URL`, or the directory `HERMES_DIR` with the queue `exports`.
pub fn url() -> String {
    std::env::var("HERMES_URL")
        .unwrap_or_else(|_| format!("file://{}?queue=exports", directory().display()))
}

/// The name of the urgent exports' queue: `HERMES_URGENT_QUEUE`, default `exports_high`.
pub fn urgent_queue() -> String {
    std::env::var("HERMES_URGENT_QUEUE").unwrap_or_else(|_| "exports_high".to_owned())
}

/// The driver every program uses: the queue of [`url`], and [`urgent_queue`] for
/// [`PRIORITY_HIGH`].
///
/// # Errors
/// A URL no backend reads, or a backend that cannot be reached.
pub async fn driver() -> Result<AnyDriver, hermes::Error> {
    Connect::new(url())
        .priority_queue(urgent_queue(), PRIORITY_HIGH)
        .open()
        .await
}

/// The shutdown signal the workers watch: the backend's own where it has one (a file in the
/// queue directory, a Redis key), else the file `shutdown` in [`directory`].
pub fn shutdown_signal(driver: &AnyDriver) -> Box<dyn hermes::Shutdown> {
    driver
        .shutdown_signal()
        .unwrap_or_else(|| Box::new(SharedFileShutdown::new(directory().join("shutdown"))))
}

/// What the emit program does: reads `<report> [delay seconds] [high]` from the command line
/// and queues that export through `emitter`.
///
/// # Errors
/// A message for the user when an argument is not understood, or the emit's error.
pub async fn emit_from_arguments(emitter: &Emitter) -> Result<(), Box<dyn std::error::Error>> {
    let (report, delay, priority) = emit_arguments(std::env::args().skip(1))?;
    emitter
        .job(&ExportReport::new(&report))
        .priority(priority)
        .delay(delay)
        .send()
        .await?;
    println!("queued {report}");
    Ok(())
}

/// The arguments of the emit program: `<report> [delay seconds] [high]`.
///
/// # Errors
/// A message for the user when an argument is not understood.
pub fn emit_arguments(
    mut args: impl Iterator<Item = String>,
) -> Result<(String, Duration, Priority), String> {
    let report = args.next().unwrap_or_else(|| "sales".to_owned());
    let delay: f64 = match args.next() {
        Some(delay) => delay
            .parse()
            .map_err(|_| format!("the delay must be a number of seconds, not {delay:?}"))?,
        None => 0.0,
    };
    let priority = match args.next().as_deref() {
        Some("high") => PRIORITY_HIGH,
        Some(other) => {
            return Err(format!(
                "the third argument is `high` or nothing, not {other:?}"
            ));
        }
        None => DEFAULT_PRIORITY,
    };
    Ok((report, Duration::from_secs_f64(delay.max(0.0)), priority))
}
