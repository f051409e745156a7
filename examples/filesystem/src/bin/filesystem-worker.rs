//! `filesystem-worker`: runs report exports until `filesystem-shutdown`, SIGTERM or Ctrl-C.
//! Exits non-zero when the driver fails.
//! Also emits the nightly export (see `nightly_export`) and, with `HERMES_METRICS_LISTEN`,
//! serves its metrics.

use hermes_core::{Dispatcher, SharedFileShutdown, SignalShutdown};
use hermes_example_common::{exit_status, init_logging, init_metrics, nightly_export};
use hermes_example_filesystem::{Exporter, directory, driver, shutdown_file};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    init_logging();
    exit_status(run().await)
}

async fn run() -> Result<(), hermes_core::Error> {
    init_metrics()?;
    let dir = directory();
    let mut dispatcher = Dispatcher::new(driver(&dir)?)
        // `filesystem-shutdown` touches this file; workers started before that stop.
        .with_shutdown(SharedFileShutdown::new(shutdown_file(&dir)))
        .with_shutdown(SignalShutdown::install()?);
    dispatcher.register_job_handler(Exporter::in_directory());
    let scheduler = nightly_export(dispatcher.driver().clone())?;
    let dispatcher = dispatcher.with_scheduler(scheduler);
    dispatcher.handle(&[]).await
}
