//! Keeping the table the size of what it holds: an acknowledged row is deleted at once, and the
//! space of deleted rows is reclaimed by `VACUUM`. PostgreSQL's autovacuum does that where it
//! runs; a server without it (or with it too slow for a queue's churn) would let the table and
//! its indexes grow with every job ever handled, and claims slow down as they step over the
//! dead rows. So the driver vacuums the table itself once enough rows were deleted, or once
//! its queues ran dry after it deleted some ([`PostgresOptions::prune`](crate::PostgresOptions::prune)):
//! one process at a time (an advisory lock), in the background, never more often than every
//! [`PRUNE_AT_MOST_EVERY`].

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hermes_core::Error;

use crate::core::Core;
use crate::error::{pool_error, postgres_error};
use crate::settle::ClearOnDrop;

/// How many rows this process deletes before it vacuums the table.
pub(crate) const PRUNE_AFTER_ROWS: u64 = 20_000;

/// The shortest time between two vacuums by one process.
pub(crate) const PRUNE_AT_MOST_EVERY: Duration = Duration::from_secs(10);

impl Core {
    /// Counts `rows` deleted from the jobs table, and vacuums it in the background once
    /// enough were.
    pub(crate) fn deleted(self: &Arc<Self>, rows: usize) {
        if rows == 0 {
            return;
        }
        let total = self.deleted_rows.fetch_add(rows as u64, Ordering::Relaxed) + rows as u64;
        if total >= PRUNE_AFTER_ROWS {
            self.prune_soon();
        }
    }

    /// Vacuums the table in the background when this driver deleted rows since it last did:
    /// the queues it takes from ran dry.
    pub(crate) fn ran_dry(self: &Arc<Self>) {
        if self.deleted_rows.load(Ordering::Relaxed) > 0 {
            self.prune_soon();
        }
    }

    /// Vacuums the table in the background, unless pruning is off, the pool has a single
    /// connection, this driver vacuumed less than [`PRUNE_AT_MOST_EVERY`] ago, or it vacuums
    /// now.
    fn prune_soon(self: &Arc<Self>) {
        // A vacuum holds a connection for its whole run: not the only one.
        if !self.options.prune
            || self.options.pool_size < 2
            || self
                .last_prune
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some_and(|at| at.elapsed() < PRUNE_AT_MOST_EVERY)
            || self.pruning.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let core = self.clone();
        tokio::spawn(async move {
            let _pruning = ClearOnDrop(core.clone(), |core: &Core| &core.pruning);
            if let Err(e) = core.prune().await {
                tracing::warn!(schema = %core.options.schema, "Vacuuming the jobs table failed - {e}");
            }
            *core.last_prune.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(tokio::time::Instant::now());
        });
    }

    /// Vacuums the jobs table unless another process does now.
    async fn prune(&self) -> Result<(), Error> {
        self.deleted_rows.store(0, Ordering::Relaxed);
        let client = self.pool.get().await.map_err(pool_error)?;
        let lock = prune_lock(&self.options.schema);
        let locked: bool = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&lock])
            .await
            .map_err(postgres_error)?
            .get(0);
        if !locked {
            return Ok(());
        }
        let vacuumed = client
            .batch_execute(&format!(
                "VACUUM {}.jobs",
                crate::naming::quoted(&self.options.schema)
            ))
            .await
            .map_err(postgres_error);
        let unlocked = client
            .execute("SELECT pg_advisory_unlock($1)", &[&lock])
            .await
            .map(drop)
            .map_err(postgres_error);
        tracing::debug!(schema = %self.options.schema, "Vacuumed the jobs table");
        vacuumed.and(unlocked)
    }
}

/// The advisory lock of the vacuums of `schema`: FNV-1a of its name, apart from the lock of
/// the migrations.
fn prune_lock(schema: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in b"hermes-prune:".iter().chain(schema.as_bytes()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    i64::from_ne_bytes(hash.to_ne_bytes())
}
