//! The whole conformance suite on the driver that only delivers: every scenario of what it
//! declares runs, the others are skipped with a note.

use std::time::Duration;

use hermes_core::{Error, async_trait};
use hermes_example_delivery_only::{LEASE, ListDriver};
use hermes_testkit::suite::Harness;

/// Instances opened on one queue name share its messages, as processes on one broker do.
struct ListHarness;

#[async_trait]
impl Harness for ListHarness {
    type Driver = ListDriver;

    async fn open(&self, queue: &str) -> Result<ListDriver, Error> {
        ListDriver::new(queue)
    }

    async fn push_raw(&self, queue: &str, bytes: &[u8]) -> Result<(), Error> {
        ListDriver::push(queue, bytes.to_vec());
        Ok(())
    }

    async fn pull_raw(&self, queue: &str) -> Result<Option<Vec<u8>>, Error> {
        Ok(ListDriver::pull(queue))
    }

    async fn quarantined(&self, queue: &str) -> Result<usize, Error> {
        Ok(ListDriver::quarantined(queue))
    }

    fn visibility_timeout(&self) -> Duration {
        LEASE
    }
}

hermes_testkit::conformance_suite!(ListHarness);
