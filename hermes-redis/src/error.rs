//! Redis errors as Hermes errors.

use hermes_core::Error;

/// The error for credentials Redis refused: permanent, naming no credential.
fn refused_credentials(driver: &'static str) -> Error {
    Error::Config {
        driver,
        message: "Redis refused the credentials (a wrong user name or password, or a user \
                  without the permissions the driver needs)"
            .to_owned(),
    }
}

/// The error for a server whose TLS certificate is not trusted: permanent.
fn untrusted_certificate(driver: &'static str) -> Error {
    Error::Config {
        driver,
        message: "the Redis server's TLS certificate is not trusted (give the certificate \
                  authority it chains to with tls_ca, or check the host name)"
            .to_owned(),
    }
}

/// Whether an error's text says a TLS certificate was refused.
fn certificate_refused(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    text.contains("certificate") || text.contains("unknownissuer")
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
    if certificate_refused(&error.to_string()) {
        return untrusted_certificate(NAME);
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
/// loading its data, cluster reconfigurations and failed Sentinel lookups are temporary; the
/// rest is not.
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
    if *error.kind() == ErrorKind::Tls || certificate_refused(details) {
        return untrusted_certificate(FRED_NAME);
    }
    let temporary = matches!(
        error.kind(),
        ErrorKind::IO
            | ErrorKind::Timeout
            | ErrorKind::Canceled
            | ErrorKind::Cluster
            | ErrorKind::Routing
            | ErrorKind::Backpressure
            // No sentinel answered, or the master named did not: a failover, most likely.
            | ErrorKind::Sentinel
    ) || [
        "LOADING",
        "TRYAGAIN",
        "CLUSTERDOWN",
        "MASTERDOWN",
        "BUSY",
        "READONLY",
    ]
    .iter()
    .any(|code| details.starts_with(code));
    Error::client(FRED_NAME, error, temporary)
}
