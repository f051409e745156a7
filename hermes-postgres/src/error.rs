//! PostgreSQL errors as Hermes errors.

use hermes_core::Error;
use tokio_postgres::error::SqlState;

/// An error of `tokio-postgres`: refused credentials are a permanent configuration error;
/// lost connections, a server shutting down or starting, too many connections, and
/// serialization failures or deadlocks are temporary; the rest is not.
pub(crate) fn postgres_error(error: tokio_postgres::Error) -> Error {
    if let Some(db) = error.as_db_error() {
        let code = db.code();
        if *code == SqlState::INVALID_PASSWORD
            || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        {
            return refused_credentials();
        }
        let temporary = [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::TOO_MANY_CONNECTIONS,
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
            SqlState::LOCK_NOT_AVAILABLE,
            SqlState::QUERY_CANCELED,
        ]
        .contains(code)
            || code.code().starts_with("08");
        return Error::client(crate::NAME, error, temporary);
    }
    // No answer from the server: the connection was lost or never made.
    Error::client(crate::NAME, error, true)
}

/// An error of the pool: the server's, or a pool that could not hand out a connection in time
/// (temporary).
pub(crate) fn pool_error(error: deadpool_postgres::PoolError) -> Error {
    match error {
        deadpool_postgres::PoolError::Backend(e) => postgres_error(e),
        other => Error::driver(crate::NAME, format!("no connection: {other}"), true),
    }
}

/// The error for credentials the server refused: permanent, naming no credential.
pub(crate) fn refused_credentials() -> Error {
    Error::Config {
        driver: crate::NAME,
        message: "PostgreSQL refused the credentials (a wrong user name or password, or a user \
                  not allowed to connect to this database)"
            .to_owned(),
    }
}
