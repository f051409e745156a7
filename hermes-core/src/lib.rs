//! Background jobs for Rust, wire-compatible with the PHP library Hermes.
//!
//! A web process *emits* a job into a queue through an [`Emitter`] and returns at once; a
//! worker process runs a [`Dispatcher`] that takes jobs from the queue and runs the handlers
//! registered for their type. A job is a serde type that implements [`Job`]; on the wire it is
//! a Hermes [`Message`] in Hermes' JSON format ([`JsonSerializer`]), so PHP and Rust processes
//! can share a queue. The queue is a [`Driver`]: this crate defines the contract
//! ([`driver`], for those who write or wrap a backend), and the driver crates (`hermes-fs`,
//! `hermes-redis`, `hermes-rabbitmq`, `hermes-sqs`, and the in-memory driver of
//! `hermes-testkit`) implement it. Applications usually depend on the `hermes` crate, which
//! brings this one, the backends behind features, and `hermes::connect(url)`. Drivers are cheap
//! to clone: clones share the connection and the queues.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), hermes_core::Error> {
//! use hermes_core::{Dispatcher, Emitter, Job, JobContext};
//! use hermes_testkit::MemoryDriver;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct SendEmail {
//!     to: String,
//! }
//!
//! impl Job for SendEmail {
//!     const TYPE: &'static str = "send-email";
//! }
//!
//! async fn send_email(job: SendEmail, _ctx: JobContext) -> Result<(), std::io::Error> {
//!     println!("mailing {}", job.to);
//!     Ok(())
//! }
//!
//! let driver = MemoryDriver::new();
//!
//! // In the web process: queue the job and return.
//! Emitter::new(driver.clone()).emit_job(&SendEmail { to: "test@test.com".into() }).await?;
//!
//! // In the worker: run the handlers until shut down (here: after one job).
//! let mut dispatcher = Dispatcher::new(driver).max_items(1);
//! dispatcher.register_job(send_email);
//! dispatcher.handle(&[]).await?;
//! # Ok(()) }
//! ```
//!
//! Below the typed layer, everything Hermes has stays: [`Message`]s built by hand, the
//! [`Handler`] trait that takes a message and returns a `bool`, [`EchoHandler`], and Hermes' log
//! lines. Typed and untyped handlers, Rust and PHP emitters mix on one queue.

mod bookkeeping;
mod context;
pub mod cron;
mod dispatcher;
pub mod driver;
mod emitter;
mod emitter_controls;
mod emitter_tracking;
mod error;
pub mod flow;
mod handler;
pub mod history;
pub mod inspect;
mod job;
mod job_emit;
mod job_handler;
mod message;
mod paging;
mod queue_config;
mod retry;
mod serializer;
mod shutdown;
pub mod telemetry;
pub mod time;
mod traceparent;
pub mod tracking;
pub mod unique;
pub mod workers;

pub use context::JobContext;
pub use cron::{CatchUp, CronEntry, Scheduler};
pub use dispatcher::{Dispatcher, DispatcherOptions, HandlerOutcome, HandlerRun, Report};
pub use driver::{DEFAULT_PRIORITY, Driver, Priority};
pub use emitter::Emitter;
pub use emitter_tracking::OpenBatch;
pub use error::{BoxError, DecodeError, Error};
pub use handler::{EchoHandler, FnHandler, Handler, HandlerError, IntoHandler, handler_fn};
pub use job::Job;
pub use job_emit::JobEmit;
pub use job_handler::JobHandler;
pub use message::{Message, MessageBuilder};
pub use queue_config::QueueConfig;
pub use retry::RetryPolicy;
pub use serializer::{JsonSerializer, Serializer};
pub use shutdown::{SharedFileShutdown, Shutdown, SignalShutdown};
pub use unique::{Emitted, Unique};

/// Re-exported for custom handlers and [`Job`]s with async methods.
pub use async_trait::async_trait;
/// Re-exported for [`Shutdown::token`].
pub use tokio_util::sync::CancellationToken;
