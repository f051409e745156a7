//! `filesystem-emit <report> [delay seconds] [high]`: queues a report export.

use hermes_core::Emitter;
use hermes_example_common::{emit_from_arguments, init_logging};
use hermes_example_filesystem::{directory, driver};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    init_logging();
    emit_from_arguments(&Emitter::new(driver(&directory())?)).await
}
