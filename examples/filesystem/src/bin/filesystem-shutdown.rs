//! `filesystem-shutdown`: asks every running worker to stop.

use hermes_core::{SharedFileShutdown, Shutdown};
use hermes_example_filesystem::{directory, shutdown_file};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = directory();
    std::fs::create_dir_all(&dir)?;
    SharedFileShutdown::new(shutdown_file(&dir))
        .shutdown(None)
        .await?;
    println!("workers asked to stop");
    Ok(())
}
