//! From a URL to a driver, through the `hermes` crate: the same URLs as every program takes.

use hermes::seal::{SealKeys, SealingSerializer};
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
    let driver = connect.open().await?;
    Ok(match seal_keys()? {
        Some(keys) => driver.with_serializer(SealingSerializer::new(keys)),
        None => driver,
    })
}

/// The keys of `HERMES_SEAL_KEYS` (`id:base64,id:base64`, the current one first), when set:
/// sealed payloads are then opened, and emitted payloads sealed.
fn seal_keys() -> Result<Option<SealKeys>, Failure> {
    match std::env::var("HERMES_SEAL_KEYS") {
        Ok(text) if !text.trim().is_empty() => Ok(Some(SealKeys::parse(&text)?)),
        _ => Ok(None),
    }
}
