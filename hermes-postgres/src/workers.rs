//! Live workers: the table `<schema>.workers`, one row per running dispatcher holding its
//! announcement as JSON and when it expires. Listing removes the expired ones.

use std::time::Duration;

use hermes_core::Error;
use hermes_core::driver::{Workers, async_trait};
use hermes_core::time::unix_now;
use hermes_core::workers::WorkerInfo;

use crate::core::Core;

#[async_trait]
impl Workers for Core {
    async fn announce(&self, worker: &WorkerInfo, ttl: Duration) -> Result<(), Error> {
        let worker = worker.expiring_in(ttl);
        let info = worker.to_json();
        self.on_connection("announcing a worker", |client| async move {
            let statement = client.prepare_cached(&self.sql.announce).await?;
            client
                .execute(&statement, &[&worker.id, &info, &worker.expires])
                .await
                .map(drop)
        })
        .await
    }

    async fn withdraw(&self, id: &str) -> Result<(), Error> {
        self.on_connection("withdrawing a worker", |client| async move {
            let statement = client.prepare_cached(&self.sql.withdraw).await?;
            client.execute(&statement, &[&id]).await.map(drop)
        })
        .await
    }

    /// The announcements that hold, oldest worker first; expired ones are removed.
    async fn list(&self) -> Result<Vec<WorkerInfo>, Error> {
        let now = unix_now();
        let rows = self
            .on_connection("listing workers", |client| async move {
                let statement = client.prepare_cached(&self.sql.workers).await?;
                client.query(&statement, &[&now]).await
            })
            .await?;
        let mut workers: Vec<WorkerInfo> = rows
            .iter()
            .filter_map(|row| WorkerInfo::from_json(row.get(0)))
            .collect();
        workers.sort_by(|a, b| a.started.total_cmp(&b.started));
        Ok(workers)
    }
}
