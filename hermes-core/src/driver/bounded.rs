//! Calls to a server that end in bounded time, whatever the server does.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::Error;

/// How long one call to a server may take before it fails as a temporary error, unless a
/// driver's options say otherwise: long enough for a busy server, short enough that a worker
/// cut off from its server notices within seconds.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `call` (described by `what`, for the error) for at most `limit`; past that, gives up
/// with the temporary error [`no_answer`] makes.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::time::Duration;
/// use hermes_core::driver::bounded;
///
/// let silent = std::future::pending::<Result<(), hermes_core::Error>>();
/// let err = bounded("redis", "SADD", Duration::from_millis(10), silent).await.unwrap_err();
/// assert!(err.is_temporary());
/// assert!(err.to_string().contains("SADD got no answer within 10ms"), "{err}");
/// # }
/// ```
///
/// # Errors
/// The call's own error, or [`no_answer`]'s.
///
/// # Cancellation safety
/// As cancel safe as `call`.
pub async fn bounded<T>(
    driver: &'static str,
    what: &str,
    limit: Duration,
    call: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    bounded_until(driver, what, deadline(limit), limit, call).await
}

/// [`bounded`], ending at `until`: the end of a call of `limit` that began earlier (a call
/// of several steps that shares one bound).
///
/// # Errors
/// The call's own error, or [`no_answer`]'s.
///
/// # Cancellation safety
/// As cancel safe as `call`.
pub async fn bounded_until<T>(
    driver: &'static str,
    what: &str,
    until: Instant,
    limit: Duration,
    call: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout_at(until, call).await {
        Ok(result) => result,
        Err(_) => Err(no_answer(driver, what, limit)),
    }
}

/// The temporary error of a call, `what`, that got no answer within `limit`.
pub fn no_answer(driver: &'static str, what: &str, limit: Duration) -> Error {
    Error::Connection {
        driver,
        source: format!("{what} got no answer within {limit:?}").into(),
    }
}

/// When a call of `limit` that begins now must end (a year away for the longest ones): the
/// `until` of [`bounded_until`] for a call whose bound starts before its first step.
pub fn deadline(limit: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(limit)
        .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
}
