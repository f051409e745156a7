//! `shutdown`: asks every running worker to stop.

use hermes_example::{directory, driver, shutdown_signal};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(directory())?;
    shutdown_signal(&driver().await?).shutdown(None).await?;
    println!("workers asked to stop");
    Ok(())
}
