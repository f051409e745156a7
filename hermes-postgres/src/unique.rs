//! Unique emits: the table `<schema>.unique_keys`, whose primary key is the uniqueness key
//! (its [backend name](hermes_core::Unique::backend_name)) after the driver's default queue,
//! so that drivers of other queues in the schema have keys of their own. Taking the key and inserting the
//! row are one statement, so of concurrent emits with one key, from any process, one inserts
//! its row. An expired key is taken over in the same statement; expired keys are removed now
//! and then.

use std::sync::atomic::Ordering;

use hermes_core::driver::{UniqueEmits, async_trait, unique_backend_name};
use hermes_core::flow::CANCELLATIONS_KEPT;
use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Emitted, Error, Message, Priority, Unique};

use crate::core::Core;

/// How often, at most, a driver removes expired keys: every minute.
const SWEEP_EVERY: u64 = 60;

#[async_trait]
impl UniqueEmits for Core {
    async fn send_unique(
        &self,
        message: &Message,
        priority: Priority,
        unique: &Unique,
    ) -> Result<Emitted, Error> {
        let row = self.encode(message, priority)?;
        let key = self.unique_key(unique.key())?;
        let window = unique.window().as_secs_f64();
        let rows = self
            .on_connection("a unique send", |client| async move {
                let statement = client.prepare_cached(&self.sql.insert_unique).await?;
                let [queue, priority, due, body, channel, id] = row.params(&self.channel);
                client
                    .query(
                        &statement,
                        &[queue, priority, due, body, channel, id, &key, &window],
                    )
                    .await
            })
            .await?;
        self.sweep_now_and_then().await;
        Ok(if rows.is_empty() {
            Emitted::Duplicate
        } else {
            Emitted::Queued
        })
    }

    async fn release(&self, key: &str, holder: &str) -> Result<(), Error> {
        let key = self.unique_key(key)?;
        self.on_connection("releasing a uniqueness key", |client| async move {
            let statement = client.prepare_cached(&self.sql.release).await?;
            client.execute(&statement, &[&key, &holder]).await.map(drop)
        })
        .await
    }
}

impl Core {
    /// The stored name of the uniqueness key `key`: `<default queue>:<backend name>`.
    fn unique_key(&self, key: &str) -> Result<String, Error> {
        let scope = self.queues.get(DEFAULT_PRIORITY)?;
        Ok(format!("{scope}:{}", unique_backend_name(key)))
    }

    /// Removes the expired keys when this driver has not done so for a minute; a failure is
    /// left for the next time.
    pub(crate) async fn sweep_now_and_then(&self) {
        // Whole seconds are precise enough for a sweep once a minute.
        let now = unix_now() as u64;
        let last = self.keys_swept.load(Ordering::Relaxed);
        if now < last + SWEEP_EVERY
            || self
                .keys_swept
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let oldest = unix_now() - CANCELLATIONS_KEPT.as_secs_f64();
        let swept = self
            .on_connection("removing what expired", |client| async move {
                let statement = client.prepare_cached(&self.sql.sweep).await?;
                client.query(&statement, &[&oldest]).await
            })
            .await;
        if let Err(e) = swept {
            tracing::debug!(error = %e, "Removing expired keys, slots and requests failed");
        }
    }
}
