//! `hermes shutdown`: the signal the queue's workers watch.

use std::path::Path;

use hermes::AnyDriver;
use hermes::redis::RedisShutdown;
use hermes_core::{SharedFileShutdown, Shutdown};

use crate::Failure;
use crate::args::ShutdownArgs;

/// Sets the shutdown signal for `signal.at` (now when `None`): the Redis key `signal.key`, or
/// the file `signal.file` (for the filesystem driver by default `<directory>/shutdown`).
pub(crate) async fn shutdown(backend: &AnyDriver, signal: &ShutdownArgs) -> Result<(), Failure> {
    let (at, file, key) = (signal.at, signal.file.as_deref(), signal.key.as_str());
    let signal: Box<dyn Shutdown> = match (file, backend) {
        (Some(file), _) => Box::new(SharedFileShutdown::new(file)),
        (None, AnyDriver::FileSystem(driver)) => {
            Box::new(SharedFileShutdown::new(driver.directory().join("shutdown")))
        }
        (None, AnyDriver::Redis(driver)) => Box::new(RedisShutdown::new(driver.client(), key)),
        (None, _) => {
            return Err(Failure::usage(
                "this broker has no shared key for the signal: give --file PATH, the \
                 SharedFileShutdown file the workers watch",
            ));
        }
    };
    signal.shutdown(at).await?;
    let when = at.map_or_else(
        || "now".to_owned(),
        |at| format!("at {}", crate::args::format_rfc3339(at)),
    );
    println!(
        "shutdown signalled ({}), {when}",
        describe(file, backend, key)
    );
    Ok(())
}

fn describe(file: Option<&Path>, backend: &AnyDriver, key: &str) -> String {
    match (file, backend) {
        (Some(file), _) => format!("file {}", file.display()),
        (None, AnyDriver::FileSystem(driver)) => {
            format!("file {}", driver.directory().join("shutdown").display())
        }
        _ => format!("Redis key {key}"),
    }
}
