//! The RabbitMQ driver of Hermes, on `lapin`: Hermes' queue layout (one durable queue on the
//! default exchange, declared without arguments, persistent messages, consumed with a
//! `basic.qos` prefetch and acknowledged after the handlers), plus publisher confirms, delays of
//! any length, priorities and reconnection, and inspection: stats, purges and dead letters kept
//! in each queue's `<queue>.quarantine`, where undecodable bodies always went. See
//! [`RabbitMqDriver`], [`RabbitMqOptions`] and [`RabbitMqDriver::from_url`].
//!
//! ```no_run
//! # #[tokio::main]
//! # async fn main() -> Result<(), hermes_core::Error> {
//! use hermes_core::{Dispatcher, Emitter, Job, JobContext, SignalShutdown};
//! use hermes_rabbitmq::{RabbitMqDriver, RabbitMqOptions};
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct ExportReport {
//!     report: String,
//! }
//! impl Job for ExportReport {
//!     const TYPE: &'static str = "report.export";
//! }
//!
//! async fn export(job: ExportReport, _: JobContext) -> Result<(), std::io::Error> {
//!     println!("exporting {}", job.report);
//!     Ok(())
//! }
//!
//! let url = "amqp://guest:guest@127.0.0.1:5672/%2f";
//! let driver = RabbitMqDriver::new(url, "hermes", RabbitMqOptions::default())?;
//!
//! // The web process publishes the job; `emit_job` returns once the broker confirmed it.
//! Emitter::new(driver.clone()).emit_job(&ExportReport { report: "sales".into() }).await?;
//!
//! // The worker consumes the queue until SIGTERM or Ctrl-C.
//! let mut dispatcher = Dispatcher::new(driver).with_shutdown(SignalShutdown::install()?);
//! dispatcher.register_job(export);
//! dispatcher.handle(&[]).await?;
//! # Ok(()) }
//! ```

mod amqp;
mod config;
mod consumers;
mod core;
mod dead_letters;
mod delay;
mod driver;
mod error;
mod inspect;
mod intake;
mod ladder;
mod naming;
mod receive;
mod send;
mod settle;
mod url;

pub use config::{QueueType, RabbitMqOptions, UndecodableAction};
pub use driver::RabbitMqDriver;
pub use ladder::{DELAY_LEVELS, DELAY_UNIT_MS};
pub use naming::{
    DEAD_AT, DEAD_ERROR, DEAD_HANDLER, DEAD_ID, DEAD_KIND, DEAD_RETRIES, LEGACY_DELAY_LEVELS_MS,
    PRIORITY, delay_level, exchanges_of, legacy_delay_queue, long_delay_queue, quarantine_queue,
    queues_of,
};

/// The driver's name: what [`Driver::name`](hermes_core::Driver::name) returns, and the
/// `driver` of its errors.
pub const NAME: &str = "rabbitmq";
