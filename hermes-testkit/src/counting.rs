//! A wrapper as an application writes one: it counts the messages sent through it and
//! forwards everything else, every facet included, with [`forward!`].

use std::sync::atomic::{AtomicU64, Ordering};

use hermes_core::driver::{async_trait, forward};
use hermes_core::{Driver, Error, Message, Priority};

// ANCHOR: wrapper
/// Any driver, counting the messages sent through it. Every other call, and every facet of the
/// inner driver (figures, dead letters, live workers, unique emits, and those to come), is the
/// inner driver's.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), hermes_core::Error> {
/// use hermes_core::{DEFAULT_PRIORITY, Driver, Message};
/// use hermes_testkit::{CountingDriver, MemoryDriver};
///
/// let driver = CountingDriver::new(MemoryDriver::new());
/// driver.send(&Message::new("ping"), DEFAULT_PRIORITY).await?;
/// assert_eq!(driver.sent(), 1);
/// assert!(driver.inspect().is_some(), "the memory driver's figures, through the wrapper");
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CountingDriver<D> {
    inner: D,
    sent: AtomicU64,
}

impl<D: Driver> CountingDriver<D> {
    /// Wraps `inner`.
    pub fn new(inner: D) -> Self {
        CountingDriver {
            inner,
            sent: AtomicU64::new(0),
        }
    }

    /// How many messages were sent through the wrapper, one by one or in batches.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}

#[async_trait]
#[warn(clippy::missing_trait_methods)]
impl<D: Driver> Driver for CountingDriver<D> {
    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.inner.send(message, priority).await
    }

    async fn send_batch(&self, messages: &[Message], priority: Priority) -> Result<(), Error> {
        self.sent
            .fetch_add(messages.len() as u64, Ordering::Relaxed);
        self.inner.send_batch(messages, priority).await
    }

    forward!(inner => name, capabilities, setup_priority_queue, receive, ack, nack, extend,
        flush, facets);
}
// ANCHOR_END: wrapper
