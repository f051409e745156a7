//! Shared by the PostgreSQL driver's tests: the server's address, a plain connection, and the
//! conformance harness.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use hermes_core::{Error, Serializer, async_trait};
use hermes_postgres::{PostgresDriver, PostgresOptions};
use hermes_testkit::suite::Harness;

/// The server the tests use: `HERMES_POSTGRES_URL`, default
/// `postgres://postgres@127.0.0.1:5432/test`.
pub fn postgres_url() -> String {
    std::env::var("HERMES_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The schema the conformance tests share; each test has queues of its own.
pub const SCHEMA: &str = "hermes_test";

/// A plain connection, as another program would use.
pub async fn raw() -> Result<tokio_postgres::Client, String> {
    let url = postgres_url();
    let connect = tokio_postgres::connect(&url, tokio_postgres::NoTls);
    let (client, connection) = tokio::time::timeout(Duration::from_secs(3), connect)
        .await
        .map_err(|_| format!("no answer from {} within 3 s", postgres_url()))?
        .map_err(|e| format!("cannot connect to {}: {e}", postgres_url()))?;
    tokio::spawn(connection);
    Ok(client)
}

/// The options of the tests' instances: a claim lasts a second.
pub fn options() -> PostgresOptions {
    let mut options = PostgresOptions::default();
    options.schema = SCHEMA.to_owned();
    options.visibility_timeout = Duration::from_secs(1);
    options.pool_size = 4;
    options
}

/// Opens instances on queues of the shared test schema.
pub struct PostgresHarness;

fn client_error(e: impl std::fmt::Display) -> Error {
    Error::driver("postgres-test", e.to_string(), false)
}

#[async_trait]
impl Harness for PostgresHarness {
    type Driver = PostgresDriver;

    async fn available(&self) -> Result<(), String> {
        raw().await.map(drop)
    }

    async fn open(&self, queue: &str) -> Result<PostgresDriver, Error> {
        PostgresDriver::connect(&postgres_url(), queue, options()).await
    }

    async fn open_with(
        &self,
        queue: &str,
        serializer: Arc<dyn Serializer>,
    ) -> Result<PostgresDriver, Error> {
        let driver = self.open(queue).await?;
        Ok(driver.with_serializer(serializer))
    }

    async fn push_raw(&self, queue: &str, bytes: &[u8]) -> Result<(), Error> {
        let client = raw().await.map_err(client_error)?;
        client
            .execute(
                &format!(
                    "INSERT INTO {SCHEMA}.jobs (queue, priority, due_at, body) \
                     VALUES ($1, 100, extract(epoch FROM clock_timestamp()), $2)"
                ),
                &[&queue, &bytes],
            )
            .await
            .map_err(client_error)?;
        Ok(())
    }

    async fn pull_raw(&self, queue: &str) -> Result<Option<Vec<u8>>, Error> {
        let client = raw().await.map_err(client_error)?;
        let row = client
            .query_opt(
                &format!(
                    "DELETE FROM {SCHEMA}.jobs WHERE id = (SELECT id FROM {SCHEMA}.jobs \
                     WHERE queue = $1 AND leased_until IS NULL ORDER BY due_at, id LIMIT 1) \
                     RETURNING body"
                ),
                &[&queue],
            )
            .await
            .map_err(client_error)?;
        Ok(row.map(|row| row.get(0)))
    }

    async fn quarantined(&self, queue: &str) -> Result<usize, Error> {
        let client = raw().await.map_err(client_error)?;
        let count: i64 = client
            .query_one(
                &format!(
                    "SELECT count(*) FROM {SCHEMA}.dead_letters \
                     WHERE queue = $1 AND message_id IS NULL"
                ),
                &[&queue],
            )
            .await
            .map_err(client_error)?
            .get(0);
        Ok(usize::try_from(count).unwrap_or(0))
    }

    fn visibility_timeout(&self) -> Duration {
        options().visibility_timeout
    }

    /// The server is at a fixed address: a copy of the test binary builds the same harness.
    fn environment_of_copies(&self) -> Option<Vec<(String, String)>> {
        Some(Vec::new())
    }

    async fn cleanup(&self, queue: &str) {
        if let Ok(client) = raw().await {
            for table in ["jobs", "dead_letters"] {
                let _ = client
                    .execute(
                        &format!("DELETE FROM {SCHEMA}.{table} WHERE queue LIKE $1 || '%'"),
                        &[&queue],
                    )
                    .await;
            }
        }
    }
}
