//! `sqs-emit <report> [delay seconds] [high]`: queues a report export.

use hermes_core::Emitter;
use hermes_example_common::{emit_arguments, init_logging};
use hermes_example_sqs::{ExportReport, driver};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    init_logging();
    let (report, delay, priority) = emit_arguments(std::env::args().skip(1))?;
    let emitter = Emitter::new(driver().await?);
    emitter
        .job(&ExportReport::new(&report))
        .priority(priority)
        .delay(delay)
        .send()
        .await?;
    println!("queued {report}");
    Ok(())
}
