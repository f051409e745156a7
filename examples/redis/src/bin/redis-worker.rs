//! `redis-worker`: runs report exports until `redis-shutdown`, SIGTERM or Ctrl-C. Exits
//! non-zero when the driver fails for good; waits through Redis restarts.
//! Also emits the nightly export (see `nightly_export`) and, with `HERMES_METRICS_LISTEN`,
//! serves its metrics.

use hermes_core::{Dispatcher, SignalShutdown};
use hermes_example_common::{exit_status, init_logging, init_metrics, nightly_export};
use hermes_example_redis::{Exporter, driver, shutdown};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    init_logging();
    exit_status(run().await)
}

async fn run() -> Result<(), hermes_core::Error> {
    init_metrics()?;
    let driver = driver().await?;
    let mut dispatcher = Dispatcher::new(driver.clone())
        // `redis-shutdown` sets this key; workers started before that stop.
        .with_shutdown(shutdown(&driver))
        .with_shutdown(SignalShutdown::install()?);
    dispatcher.register_job_handler(Exporter::in_directory());
    let scheduler = nightly_export(dispatcher.driver().clone())?;
    let dispatcher = dispatcher.with_scheduler(scheduler);
    dispatcher.handle(&[]).await
}
