//! What the report-export examples share, whatever the driver: the [`ExportReport`] job, its
//! [`Exporter`] handler, the priorities and the logging set-up.
//!
//! Every example has the same three programs (`<driver>-emit <report> [delay seconds] [high]`,
//! `<driver>-worker`, `<driver>-shutdown`) and writes its export log to
//! `$HERMES_DIR/exports.log`, so one end-to-end script (`examples/e2e.sh`) checks them all.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use hermes_core::{
    DEFAULT_PRIORITY, Emitter, Job, JobContext, JobHandler, Priority, RetryPolicy, async_trait,
};
use serde::{Deserialize, Serialize};

/// The priority of urgent exports.
pub const PRIORITY_HIGH: Priority = DEFAULT_PRIORITY + 10;

/// The example's working directory: `HERMES_DIR`, default `var/hermes`.
pub fn directory() -> PathBuf {
    std::env::var_os("HERMES_DIR").map_or_else(|| PathBuf::from("var/hermes"), PathBuf::from)
}

/// The job: export one report. On the wire it is Hermes' message type `report.export` with the
/// payload `{"report": "sales"}` (and `"seconds"` for a slow one), so a PHP emitter can queue
/// it too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportReport {
    /// The report's name.
    pub report: String,
    /// How long the export takes, in seconds: a slow report, for the crash tests.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub seconds: f64,
}

impl ExportReport {
    /// An export of `report`.
    pub fn new(report: impl Into<String>) -> Self {
        ExportReport {
            report: report.into(),
            seconds: 0.0,
        }
    }

    /// An export of `report` that takes `seconds`.
    pub fn slow(report: impl Into<String>, seconds: f64) -> Self {
        ExportReport {
            seconds,
            ..ExportReport::new(report)
        }
    }
}

impl Job for ExportReport {
    const TYPE: &'static str = "report.export";

    fn retry_policy() -> Option<RetryPolicy> {
        Some(RetryPolicy::default())
    }
}

fn is_zero(seconds: &f64) -> bool {
    *seconds == 0.0
}

/// What every emit program does: reads `<report> [delay seconds] [high]` from the command line
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

/// The arguments of an emit program: `<report> [delay seconds] [high]`.
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

/// Runs exports: waits the export's `seconds` (a slow report), then appends
/// `<unix time> <report> exported` to the export log.
#[derive(Debug, Clone)]
pub struct Exporter {
    log: PathBuf,
}

impl Exporter {
    /// An exporter writing to the log file `log`.
    pub fn new(log: impl Into<PathBuf>) -> Self {
        Exporter { log: log.into() }
    }

    /// An exporter writing to `exports.log` in the example's directory.
    pub fn in_directory() -> Self {
        Exporter::new(directory().join("exports.log"))
    }
}

#[async_trait]
impl JobHandler<ExportReport> for Exporter {
    type Error = std::io::Error;

    async fn handle(&self, export: ExportReport, _ctx: JobContext) -> Result<(), Self::Error> {
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
        Ok(())
    }

    fn name(&self) -> std::borrow::Cow<'static, str> {
        "Exporter".into()
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

/// The worker's scheduler: the nightly export (`ExportReport` of the report `nightly-export`)
/// on `HERMES_EXPORT_SCHEDULE` (default `0 3 * * *`, crontab's five fields, seconds first
/// when six) in the time zone `HERMES_EXPORT_ZONE` (default `UTC`). Every worker runs it; on
/// a driver with unique jobs each night's export is queued once however many run. A night
/// missed while no worker ran is left to the next one.
///
/// # Errors
/// [`hermes_core::Error::InvalidSchedule`] for a schedule or zone that cannot be read.
pub fn nightly_export(
    driver: std::sync::Arc<dyn hermes_core::Driver>,
) -> Result<hermes_core::Scheduler, hermes_core::Error> {
    use hermes_core::cron::CronSchedule;
    use hermes_core::{CatchUp, CronEntry, Scheduler};

    let expression =
        std::env::var("HERMES_EXPORT_SCHEDULE").unwrap_or_else(|_| "0 3 * * *".to_owned());
    let zone = std::env::var("HERMES_EXPORT_ZONE").unwrap_or_else(|_| "UTC".to_owned());
    let scheduler = Scheduler::new(Emitter::from_arc(driver)).catch_up(CatchUp::None);
    scheduler.add(CronEntry::job(
        "nightly-export",
        CronSchedule::new(&expression, &zone)?,
        &ExportReport::new("nightly-export"),
    )?)?;
    Ok(scheduler)
}

/// Serves the worker's metrics (those of [`hermes_core::telemetry`]) in Prometheus' text format
/// at `http://<address>/metrics` when `HERMES_METRICS_LISTEN` names an address
/// (`127.0.0.1:9185`, say); does nothing otherwise. Call it inside the Tokio runtime.
///
/// # Errors
/// An address that does not parse, or a listener that cannot be installed.
pub fn init_metrics() -> Result<(), hermes_core::Error> {
    let Ok(address) = std::env::var("HERMES_METRICS_LISTEN") else {
        return Ok(());
    };
    let config = |message: String| hermes_core::Error::Config {
        driver: "metrics",
        message,
    };
    let address: std::net::SocketAddr = address
        .parse()
        .map_err(|e| config(format!("HERMES_METRICS_LISTEN {address:?}: {e}")))?;
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .with_http_listener(address)
        .install()
        .map_err(|e| config(format!("the metrics listener on {address}: {e}")))?;
    hermes_core::telemetry::describe();
    tracing::info!("metrics at http://{address}/metrics");
    Ok(())
}

/// Exit status of a worker: success, or failure with the error on standard error.
pub fn exit_status(result: Result<(), hermes_core::Error>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("worker failed: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Helpers for the examples' crash tests.
pub mod testing {
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use hermes_core::Message;

    use crate::ExportReport;

    /// An export of `report` whose handler takes `seconds`.
    pub fn slow_export(report: &str, seconds: u64) -> Message {
        Message::from_job(&ExportReport::slow(report, seconds as f64)).expect("a valid export")
    }

    /// Starts the worker program `program` (a `CARGO_BIN_EXE_…` path) on the example directory
    /// `dir`, with the settings `env`, its output discarded.
    pub fn start_worker(program: &str, dir: &Path, env: &[(&str, &str)]) -> Child {
        Command::new(program)
            .env("HERMES_DIR", dir)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the worker")
    }

    /// Waits up to `timeout` until the export log of `dir` has as many lines as `reports`,
    /// then checks (half a second later, so a late duplicate shows) that each report was
    /// exported exactly once. Returns when the last export was seen.
    pub fn assert_each_exported_once(
        dir: &Path,
        reports: &[(String, u64)],
        timeout: Duration,
    ) -> Instant {
        wait_until("every export", timeout, || {
            exported(dir).len() >= reports.len()
        });
        let done = Instant::now();
        std::thread::sleep(Duration::from_millis(500));
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for report in exported(dir) {
            *counts.entry(report).or_default() += 1;
        }
        let expected: BTreeMap<String, usize> =
            reports.iter().map(|(r, _)| (r.clone(), 1)).collect();
        assert_eq!(counts, expected, "every export exactly once");
        done
    }

    /// The reports in the export log of `dir`, in the order they finished.
    pub fn exported(dir: &Path) -> Vec<String> {
        std::fs::read_to_string(dir.join("exports.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.split_whitespace().nth(1).unwrap_or_default().to_owned())
            .collect()
    }

    /// Polls `done` every 50 ms; panics naming `what` after `timeout`.
    pub fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
        let give_up = Instant::now() + timeout;
        while !done() {
            assert!(Instant::now() < give_up, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits up to `timeout` for `child` to exit and returns whether it succeeded.
    pub fn exits_cleanly(child: &mut std::process::Child, timeout: Duration) -> bool {
        let give_up = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().expect("the worker's status") {
                return status.success();
            }
            assert!(Instant::now() < give_up, "the worker did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The 21 exports of a crash test: `r00`…`r19`, with `slow` (3 s) in the middle.
    pub fn crash_test_reports() -> Vec<(String, u64)> {
        (0..21)
            .map(|i| match i {
                10 => ("slow".to_owned(), 3),
                i if i < 10 => (format!("r{i:02}"), 0),
                i => (format!("r{:02}", i - 1), 0),
            })
            .collect()
    }
}
