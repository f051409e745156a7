//! Pauses and cancellations: the tables `<schema>.paused` and `<schema>.cancellations`, rows of
//! the driver's default queue. Requests older than 30 days are removed by the driver's sweep.

use hermes_core::driver::{Controls, async_trait};
use hermes_core::flow::{CANCELLATIONS_KEPT, Cancellation, PauseTarget};
use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Error};

use crate::core::Core;

#[async_trait]
impl Controls for Core {
    async fn pause(&self, target: &PauseTarget) -> Result<(), Error> {
        let queue = self.queues.get(DEFAULT_PRIORITY)?;
        let target = target.to_string();
        self.on_connection("a pause", |client| async move {
            let statement = client.prepare_cached(&self.sql.pause).await?;
            client
                .execute(&statement, &[&&*queue, &target])
                .await
                .map(drop)
        })
        .await
    }

    async fn resume(&self, target: &PauseTarget) -> Result<bool, Error> {
        let queue = self.queues.get(DEFAULT_PRIORITY)?;
        let target = target.to_string();
        let rows = self
            .on_connection("a resume", |client| async move {
                let statement = client.prepare_cached(&self.sql.resume).await?;
                client.query(&statement, &[&&*queue, &target]).await
            })
            .await?;
        Ok(!rows.is_empty())
    }

    async fn paused(&self) -> Result<Vec<PauseTarget>, Error> {
        let queue = self.queues.get(DEFAULT_PRIORITY)?;
        let rows = self
            .on_connection("the pauses", |client| async move {
                let statement = client.prepare_cached(&self.sql.paused).await?;
                client.query(&statement, &[&&*queue]).await
            })
            .await?;
        let mut paused: Vec<PauseTarget> = rows
            .iter()
            // What another program wrote wrongly pauses nothing.
            .filter_map(|row| row.get::<_, String>(0).parse().ok())
            .collect();
        paused.sort();
        Ok(paused)
    }

    async fn cancel(&self, cancellation: &Cancellation) -> Result<(), Error> {
        let queue = self.queues.get(DEFAULT_PRIORITY)?;
        self.on_connection("a cancellation", |client| async move {
            let statement = client.prepare_cached(&self.sql.cancel).await?;
            client
                .execute(
                    &statement,
                    &[
                        &&*queue,
                        &cancellation.id,
                        &cancellation.by,
                        &cancellation.at,
                    ],
                )
                .await
                .map(drop)
        })
        .await
    }

    async fn cancellations(&self, since: f64) -> Result<Vec<Cancellation>, Error> {
        let queue = self.queues.get(DEFAULT_PRIORITY)?;
        let from = since.max(unix_now() - CANCELLATIONS_KEPT.as_secs_f64());
        let rows = self
            .on_connection("the cancellations", |client| async move {
                let statement = client.prepare_cached(&self.sql.cancellations).await?;
                client.query(&statement, &[&&*queue, &from]).await
            })
            .await?;
        Ok(rows
            .iter()
            .map(|row| {
                let mut cancellation =
                    Cancellation::new(row.get::<_, String>(0), row.get::<_, String>(1));
                cancellation.at = row.get(2);
                cancellation
            })
            .collect())
    }
}
