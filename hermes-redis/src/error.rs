//! Redis errors as Hermes errors.

use std::future::Future;
use std::time::Duration;

use hermes_core::Error;

/// Runs `call` for at most `timeout`; past that, a temporary error of `driver` saying so.
pub(crate) async fn bounded<T>(
    driver: &'static str,
    timeout: Duration,
    what: &str,
    call: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    bounded_by(driver, deadline(timeout), timeout, what, call).await
}

/// Runs `call` until `until` at most, the end of a call's `timeout`; past that, a temporary
/// error of `driver` saying so.
pub(crate) async fn bounded_by<T>(
    driver: &'static str,
    until: tokio::time::Instant,
    timeout: Duration,
    what: &str,
    call: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout_at(until, call).await {
        Ok(result) => result,
        Err(_) => Err(no_answer(driver, what, timeout)),
    }
}

/// When a call of `timeout` that begins now must end (a year away for the longest ones).
pub(crate) fn deadline(timeout: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
}

/// The temporary error of a call, `what`, that Redis did not answer within `timeout`.
pub(crate) fn no_answer(driver: &'static str, what: &str, timeout: Duration) -> Error {
    Error::driver(
        driver,
        format!("{what} got no answer from Redis within {timeout:?}"),
        true,
    )
}

/// The error for credentials Redis refused: permanent, naming no credential.
#[cfg(any(feature = "redis-rs", feature = "fred"))]
fn refused_credentials(driver: &'static str) -> Error {
    Error::Config {
        driver,
        message: "Redis refused the credentials (a wrong user name or password, or a user \
                  without the permissions the driver needs)"
            .to_owned(),
    }
}

/// An error of the `redis` crate: refused credentials are a permanent configuration error;
/// lost connections, timeouts, a server still loading its data, and cluster reconfigurations
/// are temporary; the rest is not.
#[cfg(feature = "redis-rs")]
pub(crate) fn redis_error(error: redis::RedisError) -> Error {
    use redis::RetryMethod;

    use crate::NAME;

    if error.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(error.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"))
    {
        return refused_credentials(NAME);
    }
    let temporary = error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_timeout()
        || error.is_cluster_error()
        || !matches!(error.retry_method(), RetryMethod::NoRetry);
    Error::client(NAME, error, temporary)
}

/// An error of `fred`: refused credentials are a permanent configuration error; lost
/// connections, timeouts, cancelled commands (the client is reconnecting), a server still
/// loading its data and cluster reconfigurations are temporary; the rest is not.
#[cfg(feature = "fred")]
pub(crate) fn fred_error(error: fred::error::Error) -> Error {
    use fred::error::ErrorKind;

    use crate::FRED_NAME;

    let details = error.details();
    if *error.kind() == ErrorKind::Auth
        || ["WRONGPASS", "NOAUTH", "NOPERM"]
            .iter()
            .any(|code| details.starts_with(code))
    {
        return refused_credentials(FRED_NAME);
    }
    let temporary = matches!(
        error.kind(),
        ErrorKind::IO
            | ErrorKind::Timeout
            | ErrorKind::Canceled
            | ErrorKind::Cluster
            | ErrorKind::Routing
            | ErrorKind::Backpressure
    ) || ["LOADING", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "BUSY"]
        .iter()
        .any(|code| details.starts_with(code));
    Error::client(FRED_NAME, error, temporary)
}
