//! Options of the PostgreSQL driver.

use std::time::Duration;

use hermes_core::Error;
use hermes_core::inspect::Retention;

/// Options of a [`PostgresDriver`](crate::PostgresDriver). Start from
/// [`PostgresOptions::default`] and change fields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PostgresOptions {
    /// The PostgreSQL schema of the driver's tables: a lower-case SQL identifier (letters,
    /// digits, `_`, up to 63 bytes). Default `hermes`.
    pub schema: String,
    /// How long a claimed row may stay unacknowledged before it is delivered again. Default
    /// 300 s.
    pub visibility_timeout: Duration,
    /// How long an idle worker waits at most between two looks at the table. Default 2.5 s.
    ///
    /// With [`listen`](PostgresOptions::listen), an idle worker looks as soon as a row
    /// commits or a delayed one is due; this bounds the wait when a notification is lost
    /// (the listening connection broke). Without, it is the polling interval.
    pub refresh_interval: Duration,
    /// Whether idle workers wait for `NOTIFY` on a connection of their own (default true).
    /// Behind a pooler in transaction mode (PgBouncer), where `LISTEN` does not work, turn it
    /// off: workers then poll every [`refresh_interval`](PostgresOptions::refresh_interval).
    pub listen: bool,
    /// How many connections the driver's pool keeps at most. Default 8.
    pub pool_size: usize,
    /// Whether connecting runs the embedded migrations first (default true). Off, connecting
    /// only checks the schema's version: run [`PostgresDriver::migrate`](crate::PostgresDriver::migrate)
    /// or `hermes migrate` yourself.
    pub migrate: bool,
    /// How many rows one claim takes at most; the extra ones wait in this process, claimed,
    /// until a worker asks (at most half the visibility timeout, then they are given back).
    /// Default 16.
    pub prefetch: usize,
    /// Send acknowledgements with the next claim instead of one statement each. `ack` then
    /// returns at once, and the rows are deleted with the next claim, or at the latest after
    /// [`ACK_DELAY`](crate::ACK_DELAY), or by `flush` when the dispatcher stops. A worker
    /// killed in between runs those messages again after the visibility timeout, which
    /// at-least-once delivery allows. Default true.
    pub deferred_acks: bool,
    /// Whether the driver vacuums the jobs table itself once it deleted 20,000 rows, or its
    /// queues ran dry after it deleted some (default true): one process at a time, in the
    /// background, at most every 10 s. Acknowledged rows
    /// are deleted, and only `VACUUM` makes their space reusable; PostgreSQL's autovacuum does
    /// it where it runs, but a server without it would let the table grow with every job ever
    /// handled. Turn it off when autovacuum keeps up (see the guide).
    pub prune: bool,
    /// How many dead letters each queue keeps, and for how long: the oldest go first when a
    /// message dies. Default [`Retention::default`].
    pub retention: Retention,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            schema: "hermes".to_owned(),
            visibility_timeout: Duration::from_secs(300),
            refresh_interval: Duration::from_millis(2500),
            listen: true,
            pool_size: 8,
            migrate: true,
            prefetch: 16,
            deferred_acks: true,
            prune: true,
            retention: Retention::default(),
        }
    }
}

/// Checks the options whose values would make a driver spin: a visibility timeout or a refresh
/// interval of zero.
///
/// # Errors
/// [`Error::Config`] naming the option.
pub(crate) fn check(options: &PostgresOptions) -> Result<(), Error> {
    for (name, value) in [
        ("visibility_timeout", options.visibility_timeout),
        ("refresh_interval", options.refresh_interval),
    ] {
        if value < Duration::from_millis(1) {
            return Err(Error::Config {
                driver: crate::NAME,
                message: format!("{name} is at least a millisecond"),
            });
        }
    }
    Ok(())
}
