//! `emit <report> [delay seconds] [high]`: queues a report export.

use hermes::Emitter;
use hermes_example::{driver, emit_from_arguments, init_logging};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    init_logging();
    emit_from_arguments(&Emitter::new(driver().await?)).await
}
