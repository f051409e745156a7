//! Testing Hermes drivers: an in-memory driver, the conformance suite every driver runs, and
//! helpers for tests.
//!
//! - [`MemoryDriver`]: a full-featured queue in memory, for tests and examples.
//! - [`suite`] and [`conformance_suite!`]: the scenarios every driver must pass. A driver crate
//!   implements [`suite::Harness`] and generates the tests with one line.
//! - [`LogCapture`]: asserting log lines.
//! - [`HookedDriver`]: any driver with call counters and hooks that fail chosen calls.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), hermes_core::Error> {
//! use std::time::Duration;
//! use hermes_core::{Driver, Message, DEFAULT_PRIORITY};
//! use hermes_testkit::MemoryDriver;
//!
//! let driver = MemoryDriver::new();
//! driver.send(&Message::new("ping"), DEFAULT_PRIORITY).await?;
//! let delivery = driver.receive(&[], Duration::from_secs(1)).await?.expect("a message");
//! assert_eq!(delivery.message().message_type(), "ping");
//! driver.ack(&delivery).await?;
//! assert!(driver.is_empty());
//! # Ok(()) }
//! ```

pub mod bench;
mod hooked;
mod logs;
mod memory;
mod memory_harness;
mod recorder;
mod serializer_check;
mod silent;
pub mod suite;

pub use hooked::{HookedDriver, Op};
pub use logs::LogCapture;
pub use memory::{MemoryDriver, MemoryOptions};
pub use memory_harness::MemoryHarness;
pub use recorder::{Handled, recording_handler};
pub use serializer_check::{TaggedSerializer, check_serializer_is_used};
pub use silent::silent_port;
