//! The schema's migrations, embedded in the crate: each runs once, in order, in a transaction
//! of its own, under an advisory lock so that processes starting together run each once. The
//! table `<schema>.migrations` records which ran.

use hermes_core::Error;

use crate::core::Core;
use crate::error::{pool_error, postgres_error};
use crate::naming::quoted;

/// The migrations, in order: the version each brings the schema to, and its SQL, in which
/// `{schema}` stands for the quoted schema name.
const MIGRATIONS: [(i32, &str); 5] = [
    (1, include_str!("migrations/0001_jobs.sql")),
    (2, include_str!("migrations/0002_flow.sql")),
    (3, include_str!("migrations/0003_tracking.sql")),
    (4, include_str!("migrations/0004_counters.sql")),
    (5, include_str!("migrations/0005_listing.sql")),
];

/// The schema version this code reads and writes.
pub const SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// The key of the advisory lock migrations hold: any fixed number, the same in every process.
const LOCK: i64 = 0x6865_726d_6573; // "hermes"

impl Core {
    /// Brings the schema to [`SCHEMA_VERSION`], creating it when missing; does nothing when it
    /// is there already.
    ///
    /// # Errors
    /// [`Error::Config`] when the schema is newer than this code; the server's errors.
    pub(crate) async fn migrate(&self) -> Result<(), Error> {
        // Most starts find the schema current: they need no lock and no right to change it.
        let current = self.version_on_server().await?;
        newer_than_code(current)?;
        if current == SCHEMA_VERSION {
            return Ok(());
        }
        let schema = quoted(&self.options.schema);
        let mut client = self.pool.get().await.map_err(pool_error)?;
        let transaction = client.transaction().await.map_err(postgres_error)?;
        transaction
            .execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK])
            .await
            .map_err(postgres_error)?;
        transaction
            .batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS {schema};
                 CREATE TABLE IF NOT EXISTS {schema}.migrations (
                     version integer PRIMARY KEY,
                     applied_at timestamptz NOT NULL DEFAULT now())"
            ))
            .await
            .map_err(postgres_error)?;
        let current = current_version(&transaction, &schema).await?;
        newer_than_code(current)?;
        for (version, sql) in MIGRATIONS {
            if version <= current {
                continue;
            }
            transaction
                .batch_execute(&sql.replace("{schema}", &schema))
                .await
                .map_err(postgres_error)?;
            transaction
                .execute(
                    &format!("INSERT INTO {schema}.migrations (version) VALUES ($1)"),
                    &[&version],
                )
                .await
                .map_err(postgres_error)?;
            tracing::info!(schema = %self.options.schema, version, "Migrated the Hermes schema");
        }
        transaction.commit().await.map_err(postgres_error)
    }

    /// Checks that the schema is at [`SCHEMA_VERSION`].
    ///
    /// # Errors
    /// [`Error::Config`] when it is missing, older (run the migrations) or newer (update the
    /// code).
    pub(crate) async fn check_schema_version(&self) -> Result<(), Error> {
        let current = self.version_on_server().await?;
        newer_than_code(current)?;
        if current < SCHEMA_VERSION {
            return Err(Error::Config {
                driver: crate::NAME,
                message: format!(
                    "the schema {} is at version {current}, this code needs {SCHEMA_VERSION}: \
                     run `hermes migrate` or PostgresDriver::migrate",
                    self.options.schema
                ),
            });
        }
        Ok(())
    }
}

impl Core {
    /// The schema's version on the server; 0 when it has none.
    async fn version_on_server(&self) -> Result<i32, Error> {
        let schema = quoted(&self.options.schema);
        let table = format!("{schema}.migrations");
        let exists: bool = self
            .on_connection("reading the schema's version", |client| async move {
                client
                    .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
                    .await
            })
            .await?
            .get(0);
        if !exists {
            return Ok(0);
        }
        let client = self.pool.get().await.map_err(pool_error)?;
        current_version(&client, &schema).await
    }
}

/// The newest version recorded in `<schema>.migrations`; 0 for none.
async fn current_version(
    client: &impl deadpool_postgres::GenericClient,
    schema: &str,
) -> Result<i32, Error> {
    let row = client
        .query_one(
            &format!("SELECT coalesce(max(version), 0) FROM {schema}.migrations"),
            &[],
        )
        .await
        .map_err(postgres_error)?;
    Ok(row.get(0))
}

fn newer_than_code(current: i32) -> Result<(), Error> {
    if current > SCHEMA_VERSION {
        return Err(Error::Config {
            driver: crate::NAME,
            message: format!(
                "the schema is at version {current}, newer than this code's {SCHEMA_VERSION}: \
                 update hermes-postgres"
            ),
        });
    }
    Ok(())
}
