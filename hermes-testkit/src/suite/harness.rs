use std::sync::Arc;
use std::time::Duration;

use hermes_core::{Driver, Error, Serializer, async_trait};

/// What the conformance suite needs from a driver crate: a way to open driver instances on a
/// named queue, and a few facts about them.
#[async_trait]
pub trait Harness: Send + Sync + 'static {
    /// The driver under test.
    type Driver: Driver;

    /// `Ok` when the backend is reachable; else why not (the test is then skipped, or fails
    /// under `HERMES_TEST_STRICT=1`).
    async fn available(&self) -> Result<(), String> {
        Ok(())
    }

    /// Opens a driver instance whose default queue is called `queue`, with the driver's default
    /// serializer (Hermes' JSON, as the scenarios push and read it). Every call opens a new,
    /// independent instance (as another process would) on the same queue.
    async fn open(&self, queue: &str) -> Result<Self::Driver, Error>;

    /// Opens an instance as [`open`](Harness::open) does, with `serializer` in place of the
    /// driver's default one (the driver's `with_serializer`), for
    /// [`SerializedHarness`](crate::suite::SerializedHarness). Default: an error saying the
    /// harness cannot.
    async fn open_with(
        &self,
        queue: &str,
        serializer: Arc<dyn Serializer>,
    ) -> Result<Self::Driver, Error> {
        let _ = (queue, serializer);
        Err(Error::Config {
            driver: "testkit",
            message: "this harness opens drivers with their default serializer only".into(),
        })
    }

    /// The serializer the instances encode with, when it is not the driver's default
    /// (Hermes' JSON). Default: none.
    fn serializer(&self) -> Option<Arc<dyn Serializer>> {
        None
    }

    /// Whether the serializer keeps payloads unreadable on the queue (it seals them). Default:
    /// false.
    fn hides_payloads(&self) -> bool {
        false
    }

    /// Bytes that look like a message but that the serializer refuses (a payload sealed with
    /// a key it does not hold, say), to check that they are quarantined. Default: none.
    fn refused_input(&self) -> Option<Vec<u8>> {
        None
    }

    /// Puts `bytes` on the default queue called `queue` as a foreign producer would, without
    /// going through the driver's serializer.
    async fn push_raw(&self, queue: &str, bytes: &[u8]) -> Result<(), Error>;

    /// Takes the oldest waiting message off the default queue called `queue` as a foreign
    /// consumer (a PHP worker) would, without going through the driver's serializer, and
    /// returns its body as that consumer reads it: the bytes on the backend, or the bytes of
    /// the text where the backend carries bodies as text (SQS). `None` when no message is
    /// waiting; a backend that is not ordered (a Redis set) gives any one. It may wait briefly
    /// (a short poll) for a message just sent.
    async fn pull_raw(&self, queue: &str) -> Result<Option<Vec<u8>>, Error>;

    /// Whether [`push_raw`](Harness::push_raw) can carry `bytes` unchanged (an SQS body, say,
    /// is non-empty text without most control characters). Scenarios with random input push
    /// only what it can. Default: any bytes.
    fn carries_raw(&self, bytes: &[u8]) -> bool {
        let _ = bytes;
        true
    }

    /// How many inputs of the queue called `queue` are in quarantine.
    async fn quarantined(&self, queue: &str) -> Result<usize, Error>;

    /// The visibility timeout the instances were opened with (the time after which a claimed,
    /// unacknowledged message is delivered again). Keep it short: scenarios wait for it.
    fn visibility_timeout(&self) -> Duration;

    /// A factor for the message counts of the bulk scenarios, for slow backends. Default 1.
    fn scale(&self) -> f64 {
        1.0
    }

    /// Removes what a test left on the backend for the queue called `queue`.
    async fn cleanup(&self, queue: &str) {
        let _ = queue;
    }

    /// What another process needs in its environment to build a harness on the same backend
    /// as this one, when the test binary starts copies of itself to run a scenario's workers
    /// in processes of their own (an empty list when the harness builds the same wherever
    /// it is made: a server at a fixed address, say). `None`, the default, when another
    /// process cannot reach this harness's backend (it lives in this process): those
    /// scenarios then run their workers in this process.
    fn environment_of_copies(&self) -> Option<Vec<(String, String)>> {
        None
    }
}

/// Runs another harness's driver as `Arc<dyn Driver>`, to prove the suite passes through
/// dynamic dispatch too.
#[derive(Debug)]
pub struct DynHarness<H>(pub H);

/// `Harness` for a harness around another one (its field `0`), whose drivers are the other's,
/// made into `$driver` by `$wrap` (the async body of `|harness, queue, driver|`, giving a
/// `Result`); everything else is the other harness's.
macro_rules! harness_around {
    ($harness:ident, $driver:ty, |$this:ident, $queue:ident, $inner:ident| $wrap:expr) => {
        #[async_trait]
        impl<H: Harness> Harness for $harness<H> {
            type Driver = $driver;

            async fn available(&self) -> Result<(), String> {
                self.0.available().await
            }

            async fn open(&self, queue: &str) -> Result<Self::Driver, Error> {
                let ($this, $queue, $inner) = (self, queue, self.0.open(queue).await?);
                $wrap
            }

            async fn open_with(
                &self,
                queue: &str,
                serializer: std::sync::Arc<dyn hermes_core::Serializer>,
            ) -> Result<Self::Driver, Error> {
                let ($this, $queue, $inner) =
                    (self, queue, self.0.open_with(queue, serializer).await?);
                $wrap
            }

            fn serializer(&self) -> Option<std::sync::Arc<dyn hermes_core::Serializer>> {
                self.0.serializer()
            }

            fn hides_payloads(&self) -> bool {
                self.0.hides_payloads()
            }

            fn refused_input(&self) -> Option<Vec<u8>> {
                self.0.refused_input()
            }

            async fn push_raw(&self, queue: &str, bytes: &[u8]) -> Result<(), Error> {
                self.0.push_raw(queue, bytes).await
            }

            async fn pull_raw(&self, queue: &str) -> Result<Option<Vec<u8>>, Error> {
                self.0.pull_raw(queue).await
            }

            fn environment_of_copies(&self) -> Option<Vec<(String, String)>> {
                self.0.environment_of_copies()
            }

            fn carries_raw(&self, bytes: &[u8]) -> bool {
                self.0.carries_raw(bytes)
            }

            async fn quarantined(&self, queue: &str) -> Result<usize, Error> {
                self.0.quarantined(queue).await
            }

            fn visibility_timeout(&self) -> std::time::Duration {
                self.0.visibility_timeout()
            }

            fn scale(&self) -> f64 {
                self.0.scale()
            }

            async fn cleanup(&self, queue: &str) {
                self.0.cleanup(queue).await;
            }
        }
    };
}

pub(super) use harness_around;

harness_around!(DynHarness, Arc<dyn Driver>, |_harness, _queue, driver| {
    Ok(Arc::new(driver))
});
