//! The job of the example and its handler.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use hermes::{JobContext, JobHandler, RetryPolicy, async_trait};
use serde::{Deserialize, Serialize};

use crate::directory;

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

impl hermes::Job for ExportReport {
    const TYPE: &'static str = "report.export";

    fn retry_policy() -> Option<RetryPolicy> {
        Some(RetryPolicy::default())
    }
}

fn is_zero(seconds: &f64) -> bool {
    *seconds == 0.0
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
    type Output = ();
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
            hermes::time::unix_now(),
            export.report
        )?;
        println!("exported {}", export.report);
        Ok(())
    }

    fn name(&self) -> std::borrow::Cow<'static, str> {
        "Exporter".into()
    }
}
