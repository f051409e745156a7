//! Flow control: how many jobs of a type run at once and how often they start, across every
//! worker ([`Limits`]); a handler that asks to run later ([`Snooze`]); pausing queues and job
//! types ([`PauseTarget`]); cancelling jobs ([`Cancellation`]).
//!
//! Limits are declared per job type ([`Job::limits`](crate::Job::limits),
//! [`Dispatcher::limit`](crate::Dispatcher::limit)) and enforced by the dispatcher against
//! state the backend keeps ([`LimitStore`](crate::driver::LimitStore)), so they hold across
//! processes. A job over a limit is not failed and uses no retry: it is put back to run a
//! little later, and the worker takes another job meanwhile. Pauses and cancellations live in
//! the backend too ([`Controls`](crate::driver::Controls)); workers read them every
//! [`CONTROLS_REFRESH`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), hermes_core::Error> {
//! use hermes_core::flow::{Limits, Rate};
//! use hermes_core::{Dispatcher, Emitter, Job, JobContext};
//! use hermes_testkit::MemoryDriver;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct CallApi {
//!     customer: String,
//! }
//!
//! impl Job for CallApi {
//!     const TYPE: &'static str = "call-api";
//!
//!     // At most 5 calls at once, and 50 a minute per customer.
//!     fn limits() -> Limits {
//!         Limits::new().concurrency(5).rate_per_key(Rate::per_minute(50))
//!     }
//!
//!     fn limit_key(&self) -> Option<String> {
//!         Some(self.customer.clone())
//!     }
//! }
//!
//! let driver = MemoryDriver::new();
//! Emitter::new(driver.clone()).emit_job(&CallApi { customer: "acme".into() }).await?;
//!
//! let mut dispatcher = Dispatcher::new(driver).max_items(1);
//! dispatcher.register_job(|_job: CallApi, _ctx: JobContext| async { Ok::<_, std::io::Error>(()) });
//! dispatcher.handle(&[]).await?;
//! # Ok(()) }
//! ```
//!
//! PHP Hermes workers sharing a queue know nothing of limits, pauses or cancellations: only
//! Rust workers keep them.

mod limits;
mod snooze;
mod state;

use std::time::Duration;

pub(crate) use limits::check_limit_key;
pub use limits::{
    Limits, MAX_LIMIT, MAX_LIMIT_KEY_LEN, MAX_RATE, MAX_RATE_PERIOD, MIN_RATE_PERIOD, Rate,
};
pub use snooze::{MAX_SNOOZE, Snooze};
pub use state::{Admission, Bound, CANCELLATIONS_KEPT, Cancellation, PauseTarget};

/// How often a worker reads the pauses and cancellations of its backend: twice a second, so a
/// pause or a cancellation takes effect within a second.
pub const CONTROLS_REFRESH: Duration = Duration::from_millis(500);

/// The most cancellations one read of a backend returns
/// ([`Controls::cancellations`](crate::driver::Controls::cancellations)); a worker reads on
/// from the newest while it gets full pages.
pub const CANCELLATIONS_PAGE: usize = 1000;
