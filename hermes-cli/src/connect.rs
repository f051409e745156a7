//! From a URL to a driver: each driver crate reads its own URLs.

use std::sync::Arc;

use hermes_core::{Driver, Priority};

use crate::Failure;

/// The driver of `url`, with the priority queues `priorities` set up.
pub(crate) fn connect(
    url: &str,
    priorities: &[(String, Priority)],
) -> Result<Arc<dyn Driver>, Failure> {
    let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
    let driver: Arc<dyn Driver> = match scheme {
        "file" => Arc::new(hermes_fs::FileSystemDriver::from_url(url)?),
        "" => {
            return Err(Failure::usage(
                "--url needs a scheme, such as file:///var/hermes",
            ));
        }
        other => {
            return Err(Failure::usage(format!(
                "this hermes command does not read {other}:// URLs yet; it reads file://"
            )));
        }
    };
    for (name, priority) in priorities {
        driver.setup_priority_queue(name, *priority)?;
    }
    Ok(driver)
}
