//! The conformance harness of [`MemoryDriver`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use hermes_core::{DEFAULT_PRIORITY, Error, async_trait};

use crate::suite::Harness;
use crate::{MemoryDriver, MemoryOptions};

/// Runs the conformance suite on [`MemoryDriver`]: instances opened on the same queue name
/// share one in-memory queue.
#[derive(Debug)]
pub struct MemoryHarness {
    queues: Mutex<HashMap<String, MemoryDriver>>,
    visibility_timeout: Duration,
}

impl MemoryHarness {
    /// A harness whose drivers use a 1 s visibility timeout and a 1 MiB payload limit.
    pub fn new() -> Self {
        MemoryHarness {
            queues: Mutex::default(),
            visibility_timeout: Duration::from_secs(1),
        }
    }

    fn existing(&self, queue: &str) -> Result<MemoryDriver, Error> {
        self.queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(queue)
            .map(MemoryDriver::reopen)
            .ok_or_else(|| Error::InvalidDelivery(format!("no queue {queue} was opened")))
    }
}

impl Default for MemoryHarness {
    fn default() -> Self {
        MemoryHarness::new()
    }
}

#[async_trait]
impl Harness for MemoryHarness {
    type Driver = MemoryDriver;

    async fn open(&self, queue: &str) -> Result<MemoryDriver, Error> {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(driver) = queues.get(queue) {
            return Ok(driver.reopen());
        }
        let driver = MemoryDriver::with_options(MemoryOptions {
            queue: queue.to_owned(),
            visibility_timeout: self.visibility_timeout,
            max_payload: Some(1 << 20),
            ..MemoryOptions::default()
        })?;
        queues.insert(queue.to_owned(), driver.reopen());
        Ok(driver)
    }

    async fn open_with(
        &self,
        queue: &str,
        serializer: std::sync::Arc<dyn hermes_core::Serializer>,
    ) -> Result<MemoryDriver, Error> {
        Ok(self.open(queue).await?.with_serializer(serializer))
    }

    async fn push_raw(&self, queue: &str, bytes: &[u8]) -> Result<(), Error> {
        self.existing(queue)?.push_raw(DEFAULT_PRIORITY, bytes)
    }

    async fn pull_raw(&self, queue: &str) -> Result<Option<Vec<u8>>, Error> {
        self.existing(queue)?.pull_raw(DEFAULT_PRIORITY)
    }

    async fn quarantined(&self, queue: &str) -> Result<usize, Error> {
        Ok(self.existing(queue)?.quarantined().len())
    }

    fn visibility_timeout(&self) -> Duration {
        self.visibility_timeout
    }
}
