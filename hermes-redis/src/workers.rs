//! Live workers: the hash `<key>_workers` (in the queue's hash slot) maps each running
//! dispatcher's id to its announcement; each announcement says until when it holds, and
//! listing removes those past it. The hash itself has a TTL, which each announcement extends to
//! at least its own, so it disappears when every worker stopped announcing. PHP Hermes never
//! reads the key.

use std::time::Duration;

use hermes_core::Error;
use hermes_core::driver::{Workers, async_trait};
use hermes_core::time::unix_now;
use hermes_core::workers::WorkerInfo;

use crate::client::Reply;
use crate::core::Core;
use crate::scripts::Script;

#[async_trait]
impl Workers for Core {
    async fn announce(&self, worker: &WorkerInfo, ttl: Duration) -> Result<(), Error> {
        let worker = worker.expiring_in(ttl);
        let ttl_ms = ttl.as_millis().max(1).to_string();
        self.client
            .eval(
                Script::Announce,
                &[self.keys.workers.as_str()],
                &[worker.id.as_bytes(), &worker.to_json(), ttl_ms.as_bytes()],
            )
            .await?;
        Ok(())
    }

    async fn withdraw(&self, id: &str) -> Result<(), Error> {
        let key = self.keys.workers.as_bytes();
        self.client.command("HDEL", &[key, id.as_bytes()]).await?;
        Ok(())
    }

    /// The announcements that hold, oldest worker first; expired ones are removed.
    async fn list(&self) -> Result<Vec<WorkerInfo>, Error> {
        let key = self.keys.workers.as_bytes();
        let Reply::Array(items) = self.client.command("HGETALL", &[key]).await? else {
            return Ok(Vec::new());
        };
        let now = unix_now();
        let mut workers = Vec::new();
        let mut expired: Vec<Vec<u8>> = Vec::new();
        let mut items = items.into_iter();
        while let (Some(id), Some(value)) = (items.next(), items.next()) {
            let worker = value.into_bytes().and_then(|v| WorkerInfo::from_json(&v));
            match worker {
                Some(worker) if worker.is_alive_at(now) => workers.push(worker),
                _ => expired.extend(id.into_bytes()),
            }
        }
        if !expired.is_empty() {
            let mut args: Vec<&[u8]> = vec![key];
            args.extend(expired.iter().map(Vec::as_slice));
            self.client.command("HDEL", &args).await?;
        }
        workers.sort_by(|a, b| a.started.total_cmp(&b.started));
        Ok(workers)
    }
}
