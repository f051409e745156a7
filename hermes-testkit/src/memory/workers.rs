//! The memory driver's live workers: announcements kept until they expire.

use std::time::Duration;

use hermes_core::Error;
use hermes_core::driver::{Workers, async_trait};
use hermes_core::workers::WorkerInfo;

use super::MemoryDriver;

#[async_trait]
impl Workers for MemoryDriver {
    async fn announce(&self, worker: &WorkerInfo, ttl: Duration) -> Result<(), Error> {
        let worker = worker.expiring_in(ttl);
        self.lock().workers.insert(worker.id.clone(), worker);
        Ok(())
    }

    async fn withdraw(&self, id: &str) -> Result<(), Error> {
        self.lock().workers.remove(id);
        Ok(())
    }

    async fn list(&self) -> Result<Vec<WorkerInfo>, Error> {
        let now = hermes_core::time::unix_now();
        let mut state = self.lock();
        state.workers.retain(|_, w| w.is_alive_at(now));
        let mut workers: Vec<WorkerInfo> = state.workers.values().cloned().collect();
        workers.sort_by(|a, b| a.started.total_cmp(&b.started));
        Ok(workers)
    }
}
