//! `sqs-worker`: runs report exports until `sqs-shutdown`, SIGTERM or Ctrl-C. Exits non-zero
//! when the driver fails for good.

use std::sync::Arc;

use hermes_core::{Dispatcher, SignalShutdown};
use hermes_example_common::{exit_status, init_logging};
use hermes_example_sqs::{EXPORT, ExportHandler, driver, shutdown};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    init_logging();
    exit_status(run().await)
}

async fn run() -> Result<(), hermes_core::Error> {
    let mut dispatcher = Dispatcher::new(driver().await?)
        .with_shutdown(shutdown())
        .with_shutdown(SignalShutdown::install()?);
    dispatcher.register_handler(EXPORT, Arc::new(ExportHandler::in_directory()));
    dispatcher.handle(&[]).await
}
