//! The nightly export, emitted by every worker's scheduler.

use hermes::cron::CronSchedule;
use hermes::{CatchUp, CronEntry, Driver, Emitter, Error, Scheduler};

use crate::ExportReport;

/// The worker's scheduler: the nightly export (`ExportReport` of the report `nightly-export`)
/// on `HERMES_EXPORT_SCHEDULE` (default `0 3 * * *`, crontab's five fields, seconds first
/// when six) in the time zone `HERMES_EXPORT_ZONE` (default `UTC`). Every worker runs it; on
/// a driver with unique jobs each night's export is queued once however many run. A night
/// missed while no worker ran is left to the next one.
///
/// # Errors
/// [`hermes::Error::InvalidSchedule`] for a schedule or zone that cannot be read.
pub fn nightly_export(driver: std::sync::Arc<dyn Driver>) -> Result<Scheduler, Error> {
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
