//! Emits on a transaction or connection of `tokio-postgres`.

use hermes_core::Error;
use hermes_core::driver::async_trait;
use tokio_postgres::types::ToSql;

use super::{EmitStatement, EmitTarget, SqlValue};
use crate::error::postgres_error;

/// The parameters of `statement` as `tokio-postgres` takes them.
fn params(statement: &EmitStatement) -> Vec<&(dyn ToSql + Sync)> {
    statement
        .params()
        .iter()
        .map(|value| -> &(dyn ToSql + Sync) {
            match value {
                SqlValue::Text(text) => text,
                SqlValue::Integer(n) => n,
                SqlValue::Double(x) => x,
                SqlValue::Bytes(bytes) => bytes,
            }
        })
        .collect()
}

/// A `tokio_postgres::Transaction` or `tokio_postgres::Client`.
#[async_trait]
impl<C: tokio_postgres::GenericClient + Sync> EmitTarget for &C {
    async fn run(&mut self, statement: &EmitStatement) -> Result<(), Error> {
        self.execute(statement.sql(), &params(statement))
            .await
            .map(drop)
            .map_err(postgres_error)
    }
}
