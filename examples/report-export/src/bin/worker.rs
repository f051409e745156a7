//! `worker`: runs report exports until `shutdown`, SIGTERM or Ctrl-C; waits through broker
//! restarts and exits non-zero when the driver fails for good. Also emits the nightly export
//! (see `nightly_export`) and, with `HERMES_METRICS_LISTEN`, serves its metrics.

use hermes::{Dispatcher, SignalShutdown};
use hermes_example::{
    Exporter, driver, exit_status, init_logging, init_metrics, nightly_export, shutdown_signal,
};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    init_logging();
    exit_status(run().await)
}

async fn run() -> Result<(), hermes::Error> {
    init_metrics()?;
    let driver = driver().await?;
    let mut dispatcher = Dispatcher::new(driver.clone())
        // The shutdown program signals this; workers started before that stop.
        .with_shutdown(shutdown_signal(&driver))
        .with_shutdown(SignalShutdown::install()?);
    dispatcher.register_job_handler(Exporter::in_directory());
    let scheduler = nightly_export(dispatcher.driver().clone())?;
    let dispatcher = dispatcher.with_scheduler(scheduler);
    dispatcher.handle(&[]).await
}
