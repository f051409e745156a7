//! The memory driver's counters: buckets kept until they expire.

use std::time::Duration;

use hermes_core::Error;
use hermes_core::driver::{Counters, async_trait};
use hermes_core::time::unix_now;

use super::MemoryDriver;

#[async_trait]
impl Counters for MemoryDriver {
    async fn add(
        &self,
        bucket: &str,
        counts: &[(String, u64)],
        keep: Duration,
    ) -> Result<(), Error> {
        let now = unix_now();
        let mut state = self.lock();
        state.counters.retain(|_, (until, _)| *until > now);
        let (until, counters) = state.counters.entry(bucket.to_owned()).or_default();
        *until = until.max(now + keep.as_secs_f64());
        for (name, n) in counts {
            *counters.entry(name.clone()).or_default() += n;
        }
        Ok(())
    }

    async fn read(&self, buckets: &[String]) -> Result<Vec<(String, Vec<(String, u64)>)>, Error> {
        let now = unix_now();
        let state = self.lock();
        Ok(buckets
            .iter()
            .filter_map(|bucket| {
                let (until, counters) = state.counters.get(bucket)?;
                (*until > now).then(|| {
                    let list = counters.iter().map(|(n, c)| (n.clone(), *c)).collect();
                    (bucket.clone(), list)
                })
            })
            .collect())
    }
}
