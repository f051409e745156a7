//! Emits on a transaction or connection of `sqlx`.

use hermes_core::Error;
use hermes_core::driver::async_trait;

use super::{EmitStatement, EmitTarget, SqlValue};

#[async_trait]
impl EmitTarget for &mut sqlx::PgConnection {
    async fn run(&mut self, statement: &EmitStatement) -> Result<(), Error> {
        let mut query = sqlx::query(statement.sql());
        for value in statement.params() {
            query = match value {
                SqlValue::Text(text) => query.bind(text.as_str()),
                SqlValue::Integer(n) => query.bind(*n),
                SqlValue::Double(x) => query.bind(*x),
                SqlValue::Bytes(bytes) => query.bind(bytes.as_slice()),
            };
        }
        query
            .execute(&mut **self)
            .await
            .map(drop)
            .map_err(sqlx_error)
    }
}

/// An error of `sqlx`: temporary when the connection was lost or the pool gave none.
fn sqlx_error(error: sqlx::Error) -> Error {
    let temporary = matches!(
        error,
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed
    );
    Error::client(crate::NAME, error, temporary)
}
