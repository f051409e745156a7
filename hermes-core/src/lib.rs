//! Background jobs for Rust, wire-compatible with the PHP library Hermes.
//!
//! A web process *emits* a job into a queue through an [`Emitter`] and returns at once; a
//! worker process runs a [`Dispatcher`] that takes jobs from the queue and runs the handlers
//! registered for their type. A job is a serde type that implements [`Job`]; on the wire it is
//! a Hermes [`Message`] in Hermes' JSON format ([`JsonSerializer`]), so PHP and Rust processes
//! can share a queue. The queue is a [`Driver`]: this crate defines the contract, and the
//! driver crates (`hermes-fs`, `hermes-redis`, `hermes-rabbitmq`, `hermes-sqs`, and the
//! in-memory driver of `hermes-testkit`) implement it. Drivers are cheap to clone: clones share
//! the connection and the queues.
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

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeExamples;

mod context;
mod cron;
mod dispatcher;
mod driver;
mod driver_url;
mod emitter;
mod error;
mod handler;
mod inspect;
mod job;
mod job_emit;
mod job_handler;
mod message;
mod priorities;
mod queue_config;
mod retry;
mod serializer;
mod shutdown;
pub mod task;
pub mod telemetry;
pub mod time;
mod traceparent;
mod unique;
mod workers;

pub use context::JobContext;
pub use cron::{CatchUp, CronEntry, CronSchedule, CronStatus, Scheduler};
pub use dispatcher::{Dispatcher, DispatcherOptions, HandlerOutcome, HandlerRun, Report};
pub use driver::{
    Capabilities, DEFAULT_PRIORITY, Delivery, Driver, Priority, Receipt, validate_queue_name,
};
pub use driver_url::DriverUrl;
pub use emitter::Emitter;
pub use error::{BoxError, DecodeError, EXCERPT_LIMIT, Error, excerpt};
pub use handler::{EchoHandler, FnHandler, Handler, HandlerError, IntoHandler, handler_fn};
pub use inspect::{
    DeadKind, DeadLetter, DeadReason, Figure, QueueState, QueueStats, Replay, Retention,
};
pub use job::Job;
pub use job_emit::JobEmit;
pub use job_handler::JobHandler;
pub use message::{LATEST_DUE, Message, MessageBuilder};
pub use priorities::PriorityQueues;
pub use queue_config::QueueConfig;
pub use retry::RetryPolicy;
pub use serializer::{JsonSerializer, Serializer};
pub use shutdown::{SharedFileShutdown, Shutdown, SignalShutdown};
pub use unique::{
    DEFAULT_UNIQUE_WINDOW, Emitted, MAX_UNIQUE_KEY_LEN, MAX_UNIQUE_WINDOW, Release, Unique,
    unique_backend_name,
};
pub use workers::{RunningMessage, ScheduledEntry, WorkerInfo};

/// Re-exported for drivers and custom handlers.
pub use async_trait::async_trait;
/// Re-exported for [`Shutdown::token`].
pub use tokio_util::sync::CancellationToken;
