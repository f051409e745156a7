//! Testing with Hermes: your jobs, and drivers. An in-memory driver, helpers for testing your
//! own jobs, the conformance suite every driver runs, and helpers for tests.
//!
//! - [`MemoryDriver`]: a full-featured queue in memory, for tests and examples.
//! - [`perform_job`] and [`MemoryDriver::queued_jobs`]: testing your own jobs, by running one
//!   through its handlers in process and by seeing what your code queued.
//! - [`suite`] and [`conformance_suite!`]: the scenarios every driver must pass. A driver crate
//!   implements [`suite::Harness`] and generates the tests with one line.
//! - [`LogCapture`]: asserting log lines.
//! - [`HookedDriver`]: any driver with call counters and hooks that fail chosen calls;
//!   [`CountingDriver`]: a wrapper as an application writes one, with `forward!`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), hermes_core::Error> {
//! use hermes_core::{Dispatcher, Emitter, Job, JobContext};
//! use hermes_testkit::{MemoryDriver, perform_job};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, PartialEq, Serialize, Deserialize)]
//! struct Ping {
//!     n: u32,
//! }
//! impl Job for Ping {
//!     const TYPE: &'static str = "ping";
//! }
//!
//! // What the code under test queued…
//! let driver = MemoryDriver::new();
//! Emitter::new(driver.clone()).emit_job(&Ping { n: 1 }).await?;
//! assert_eq!(driver.queued_jobs::<Ping>(), [Ping { n: 1 }]);
//!
//! // …and what its handler makes of a job.
//! let mut dispatcher = Dispatcher::new(driver);
//! dispatcher.register_job(|ping: Ping, _: JobContext| async move {
//!     if ping.n == 0 { Err("zero") } else { Ok(()) }
//! });
//! assert!(perform_job(&dispatcher, &Ping { n: 1 }).await.succeeded());
//! assert!(!perform_job(&dispatcher, &Ping { n: 0 }).await.succeeded());
//! # Ok(()) }
//! ```

pub mod bench;
mod counting;
mod hooked;
mod job_testing;
mod logs;
mod memory;
mod memory_harness;
mod overlap;
mod recorder;
pub mod scheduler_processes;
mod serializer_check;
mod silent;
pub mod suite;

pub use counting::CountingDriver;
pub use hooked::{HookedDriver, Op};
pub use job_testing::perform_job;
pub use logs::LogCapture;
pub use memory::{MemoryDriver, MemoryOptions};
pub use memory_harness::MemoryHarness;
pub use overlap::most_at_once;
pub use recorder::{Handled, recording_handler};
pub use serializer_check::{TaggedSerializer, check_serializer_is_used};
pub use silent::silent_port;
