//! From a URL to a driver, through the `hermes` crate: the same URLs as every program takes.

use hermes::{AnyDriver, Connect, Priority};

use crate::Failure;

/// The URL's scheme, for messages: never the rest, which may hold a password.
pub(crate) fn scheme(url: &str) -> &str {
    url.split_once("://").map_or("", |(scheme, _)| scheme)
}

/// The driver of `url`, with the priority queues `priorities` set up.
pub(crate) async fn connect(
    url: &str,
    priorities: &[(String, Priority)],
) -> Result<AnyDriver, Failure> {
    let connect = priorities
        .iter()
        .fold(Connect::new(url), |connect, (name, priority)| {
            connect.priority_queue(name.clone(), *priority)
        });
    Ok(connect.open().await?)
}
