//! The limit store: the tables `<schema>.limit_slots` and `<schema>.limit_starts`, per bound
//! named after the driver's default queue, on the server's clock. An admission is one call of
//! the function `<schema>.admit`, which locks its bounds and takes all or nothing.

use std::time::Duration;

use hermes_core::driver::{LimitStore, async_trait};
use hermes_core::flow::{Admission, Bound};
use hermes_core::{DEFAULT_PRIORITY, Error};

use crate::core::Core;

impl Core {
    /// The stored name of the bound called `name`: `<default queue>:<name>`.
    fn bound_name(&self, name: &str) -> Result<String, Error> {
        Ok(format!("{}:{name}", self.queues.get(DEFAULT_PRIORITY)?))
    }

    fn bound_names(
        &self,
        names: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Result<Vec<String>, Error> {
        names
            .into_iter()
            .map(|n| self.bound_name(n.as_ref()))
            .collect()
    }
}

#[async_trait]
impl LimitStore for Core {
    async fn admit(
        &self,
        holder: &str,
        bounds: &[Bound],
        lease: Duration,
    ) -> Result<Admission, Error> {
        if bounds.is_empty() {
            return Ok(Admission::Admitted);
        }
        let names = self.bound_names(bounds.iter().map(Bound::name))?;
        let mut kinds = Vec::with_capacity(bounds.len());
        let mut maxes = Vec::with_capacity(bounds.len());
        let mut periods = Vec::with_capacity(bounds.len());
        for bound in bounds {
            let period = bound.period();
            kinds.push(if period.is_some() { "r" } else { "s" });
            maxes.push(i32::try_from(bound.max()).unwrap_or(i32::MAX));
            periods.push(period.map_or(0.0, |p| p.as_secs_f64()));
        }
        let lease = lease.as_secs_f64();
        // Before, not after: an admitted job starts as soon as it is admitted.
        self.sweep_now_and_then().await;
        let row = self
            .on_connection("an admission", |client| async move {
                let statement = client.prepare_cached(&self.sql.admit).await?;
                client
                    .query_one(
                        &statement,
                        &[&holder, &lease, &names, &kinds, &maxes, &periods],
                    )
                    .await
            })
            .await?;
        let refused: i32 = row.get(0);
        let wait: f64 = row.get(1);
        if refused == 0 {
            return Ok(Admission::Admitted);
        }
        let bound = usize::try_from(refused - 1)
            .ok()
            .and_then(|i| bounds.get(i))
            .ok_or_else(|| Error::Driver {
                driver: crate::NAME,
                message: "the admission named no bound".into(),
                temporary: false,
                source: None,
            })?;
        Ok(Admission::Refused {
            name: bound.name().to_owned(),
            retry_after: (wait >= 0.0).then(|| Duration::from_secs_f64(wait)),
        })
    }

    async fn renew(&self, holder: &str, names: &[String], lease: Duration) -> Result<bool, Error> {
        if names.is_empty() {
            return Ok(true);
        }
        let wanted = names.len() as u64;
        let names = self.bound_names(names)?;
        let lease = lease.as_secs_f64();
        let renewed = self
            .on_connection("renewing limit slots", |client| async move {
                let statement = client.prepare_cached(&self.sql.renew_slots).await?;
                client.execute(&statement, &[&holder, &names, &lease]).await
            })
            .await?;
        Ok(renewed == wanted)
    }

    async fn release(&self, holder: &str, names: &[String]) -> Result<(), Error> {
        if names.is_empty() {
            return Ok(());
        }
        let names = self.bound_names(names)?;
        self.on_connection("giving up limit slots", |client| async move {
            let statement = client.prepare_cached(&self.sql.release_slots).await?;
            client
                .execute(&statement, &[&holder, &names])
                .await
                .map(drop)
        })
        .await
    }

    async fn usage(&self, bound: &Bound) -> Result<u32, Error> {
        let name = self.bound_name(bound.name())?;
        let row = self
            .on_connection("the use of a limit", |client| async move {
                match bound {
                    Bound::Starts { rate, .. } => {
                        let statement = client.prepare_cached(&self.sql.starts_used).await?;
                        let period = rate.period().as_secs_f64();
                        client.query_one(&statement, &[&name, &period]).await
                    }
                    _ => {
                        let statement = client.prepare_cached(&self.sql.slots_used).await?;
                        client.query_one(&statement, &[&name]).await
                    }
                }
            })
            .await?;
        let used: i64 = row.get(0);
        Ok(u32::try_from(used).unwrap_or(u32::MAX))
    }
}
