//! Emitting inside the application's own transaction: the job's row is written by the
//! statement the application runs in its transaction, so it exists if and only if the
//! transaction commits, and the notification that wakes idle workers goes out at the commit.
//!
//! [`PostgresDriver::emit_in`](crate::PostgresDriver::emit_in) and its siblings run the
//! statement on an [`EmitTarget`]: a transaction (or connection) of `tokio-postgres` (the
//! `tokio-postgres` feature) or of `sqlx` (the `sqlx` feature). Any other client runs the
//! [`EmitStatement`] itself: its SQL and its parameters, each a plain value.

#[cfg(feature = "sqlx")]
mod sqlx;
mod statement;
#[cfg(feature = "tokio-postgres")]
mod tokio_postgres;

pub(crate) use statement::MAX_PER_STATEMENT;
pub use statement::{EmitStatement, SqlValue};

use hermes_core::Error;
use hermes_core::driver::async_trait;

/// A transaction or connection of the application's own client that an emit runs on.
///
/// Implemented, each behind the feature of the same name, for `&tokio_postgres::Transaction`
/// and `&tokio_postgres::Client` (a `deadpool_postgres` transaction or client dereferences to
/// those: pass `&*transaction`), and for `&mut sqlx::PgConnection` (pass `&mut *transaction`
/// for a `sqlx::Transaction`). Run outside a transaction, the emit commits at once, as
/// [`send`](hermes_core::Driver::send) does.
#[async_trait]
pub trait EmitTarget: Send {
    /// Runs `statement`.
    ///
    /// # Errors
    /// The client's error as a Hermes error (temporary when the connection was lost).
    ///
    /// # Cancellation safety
    /// As the client's own: dropping the future may or may not have run the statement, and
    /// the transaction then decides whether the row exists.
    async fn run(&mut self, statement: &EmitStatement) -> Result<(), Error>;
}
