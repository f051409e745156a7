//! `filesystem-emit <report> [delay seconds] [high]`: queues a report export.

use std::time::Duration;

use hermes_core::{DEFAULT_PRIORITY, Emitter};
use hermes_example_filesystem::{PRIORITY_HIGH, directory, driver, export, init_logging};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    init_logging();
    let mut args = std::env::args().skip(1);
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
            return Err(format!("the third argument is `high` or nothing, not {other:?}").into());
        }
        None => DEFAULT_PRIORITY,
    };
    let emitter = Emitter::new(driver(&directory())?);
    emitter
        .emit(
            &export(&report, Duration::from_secs_f64(delay.max(0.0)))?,
            priority,
        )
        .await?;
    println!("queued {report}");
    Ok(())
}
