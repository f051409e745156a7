//! The counters behind the dashboard's history, per default queue: the table
//! `<schema>.counters`, a row per counter of a bucket, added to with one upsert; each add also
//! drops a few expired rows of the queue.

use std::time::Duration;

use hermes_core::driver::{Counters, async_trait};
use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Error};

use crate::core::Core;

#[async_trait]
impl Counters for Core {
    async fn add(
        &self,
        bucket: &str,
        counts: &[(String, u64)],
        keep: Duration,
    ) -> Result<(), Error> {
        if counts.is_empty() {
            return Ok(());
        }
        let queue = self.queues.get(DEFAULT_PRIORITY)?;
        let names: Vec<&str> = counts.iter().map(|(name, _)| name.as_str()).collect();
        let values: Vec<i64> = counts
            .iter()
            .map(|(_, n)| i64::try_from(*n).unwrap_or(i64::MAX))
            .collect();
        let now = unix_now();
        let until = now + keep.as_secs_f64();
        let (queue, names, values) = (&queue, &names, &values);
        self.on_connection("adding to counters", |client| async move {
            let statement = client.prepare_cached(&self.sql.counters_add).await?;
            client
                .query_one(&statement, &[queue, &bucket, names, values, &until, &now])
                .await
                .map(drop)
        })
        .await
    }

    async fn read(&self, buckets: &[String]) -> Result<Vec<(String, Vec<(String, u64)>)>, Error> {
        let queue = self.queues.get(DEFAULT_PRIORITY)?;
        let now = unix_now();
        let (queue, asked) = (&queue, &buckets);
        let rows = self
            .on_connection("reading counters", |client| async move {
                let statement = client.prepare_cached(&self.sql.counters_read).await?;
                client.query(&statement, &[queue, asked, &now]).await
            })
            .await?;
        let mut read: Vec<(String, Vec<(String, u64)>)> = buckets
            .iter()
            .map(|bucket| (bucket.clone(), Vec::new()))
            .collect();
        for row in &rows {
            let bucket: String = row.get(0);
            let count: i64 = row.get(2);
            if let Some((_, counts)) = read.iter_mut().find(|(b, _)| *b == bucket) {
                counts.push((row.get(1), u64::try_from(count).unwrap_or(0)));
            }
        }
        read.retain(|(_, counts)| !counts.is_empty());
        Ok(read)
    }
}
