//! `redis-shutdown`: asks every running worker to stop.

use hermes_core::Shutdown;
use hermes_example_redis::{driver, shutdown};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    shutdown(&driver().await?).shutdown(None).await?;
    println!("workers asked to stop");
    Ok(())
}
