//! Background jobs for Rust, wire-compatible with the PHP library Hermes.
//!
//! A web process *emits* a [`Message`] into a queue through an [`Emitter`] and returns at once;
//! a worker process runs a [`Dispatcher`] that takes messages from the queue and runs the
//! [`Handler`]s registered for their type. The queue is a [`Driver`]: this crate defines the
//! contract, and the driver crates (`hermes-fs`, `hermes-redis`, `hermes-rabbitmq`,
//! `hermes-sqs`, and the in-memory driver of `hermes-testkit`) implement it. Messages use
//! Hermes' JSON format ([`JsonSerializer`]), so PHP and Rust processes can share a queue.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), hermes_core::Error> {
//! use std::sync::Arc;
//! use hermes_core::{handler_fn, Dispatcher, Emitter, Message, DEFAULT_PRIORITY};
//! use hermes_testkit::MemoryDriver;
//!
//! let driver = Arc::new(MemoryDriver::new());
//!
//! // In the web process: queue the job and return.
//! let emitter = Emitter::from_arc(driver.clone());
//! let message = Message::builder("send-email")
//!     .payload(&serde_json::json!({"to": "test@test.com"}))
//!     .build()?;
//! emitter.emit(&message, DEFAULT_PRIORITY).await?;
//!
//! // In the worker: run the handlers until shut down (here: after one message).
//! let mut dispatcher = Dispatcher::from_arc(driver).max_items(1);
//! dispatcher.register_handler(
//!     "send-email",
//!     Arc::new(handler_fn(|message: Message| async move {
//!         println!("mailing {}", message.payload().unwrap()["to"]);
//!         Ok(true)
//!     })),
//! );
//! dispatcher.handle(&[]).await?;
//! # Ok(()) }
//! ```

mod context;
mod dispatcher;
mod driver;
mod emitter;
mod error;
mod handler;
mod job;
mod job_emit;
mod job_handler;
mod message;
mod priorities;
mod retry;
mod serializer;
mod shutdown;
pub mod task;
pub mod time;

pub use context::JobContext;
pub use dispatcher::{Dispatcher, DispatcherOptions, HandlerOutcome, HandlerRun, Report};
pub use driver::{
    Capabilities, DEFAULT_PRIORITY, Delivery, Driver, Priority, Receipt, validate_queue_name,
};
pub use emitter::Emitter;
pub use error::{BoxError, DecodeError, EXCERPT_LIMIT, Error, excerpt};
pub use handler::{EchoHandler, FnHandler, Handler, HandlerError, IntoHandler, handler_fn};
pub use job::Job;
pub use job_emit::JobEmit;
pub use job_handler::JobHandler;
pub use message::{LATEST_DUE, Message, MessageBuilder};
pub use priorities::PriorityQueues;
pub use retry::RetryPolicy;
pub use serializer::{JsonSerializer, Serializer};
pub use shutdown::{SharedFileShutdown, Shutdown, SignalShutdown};

/// Re-exported for drivers and custom handlers.
pub use async_trait::async_trait;
/// Re-exported for [`Shutdown::token`].
pub use tokio_util::sync::CancellationToken;
