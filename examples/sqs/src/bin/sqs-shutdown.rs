//! `sqs-shutdown`: asks every running worker to stop.

use hermes_core::Shutdown;
use hermes_example_sqs::{directory, shutdown};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(directory())?;
    shutdown().shutdown(None).await?;
    println!("workers asked to stop");
    Ok(())
}
