//! Hermes drivers for Redis, with the keys of PHP Hermes' `RedisSetDriver`: a set per priority,
//! the sorted set `hermes_schedule` for delayed messages, and `hermes_shutdown` for
//! [`RedisShutdown`]. One implementation of the queue logic, on the `redis` crate or on `fred`.
//!
//! ```no_run
//! # #[tokio::main]
//! # async fn main() -> Result<(), hermes_core::Error> {
//! use hermes_core::{Dispatcher, Emitter, Job, JobContext};
//! use hermes_redis::{RedisOptions, RedisSetDriver, RedisShutdown};
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
//! let driver = RedisSetDriver::connect_redis("redis://127.0.0.1:6379", RedisOptions::default()).await?;
//!
//! // The web process queues the job and returns.
//! Emitter::new(driver.clone()).emit_job(&ExportReport { report: "sales".into() }).await?;
//!
//! // The worker runs jobs until `RedisShutdown::shutdown` sets the shutdown key.
//! let shutdown = RedisShutdown::with_default_key(driver.client());
//! let mut dispatcher = Dispatcher::new(driver).with_shutdown(shutdown);
//! dispatcher.register_job(export);
//! dispatcher.handle(&[]).await?;
//! # Ok(()) }
//! ```

mod client;
mod config;
mod controls;
mod core;
mod counters;
mod dead_letters;
mod delay;
mod driver;
#[cfg(any(feature = "redis-rs", feature = "fred"))]
mod error;
mod inspect;
mod jobs;
mod keyspace;
mod limits;
mod naming;
mod pages;
mod receive;
mod scripts;
mod send;
mod settle;
mod shutdown;
mod unique;
mod url;
mod wake;
mod workers;

#[cfg(feature = "fred")]
pub use client::FredClient;
#[cfg(feature = "redis-rs")]
pub use client::RedisRsClient;
pub use client::{RedisClient, Reply, Write};
pub use config::{DeliveryMode, RedisOptions, ReplicaWait, SentinelConfig};
pub use driver::RedisSetDriver;
pub use inspect::LATENCY_SCAN_LIMIT;
pub use scripts::Script;
pub use settle::ACK_DELAY;
pub use shutdown::RedisShutdown;

/// The driver's name on the `redis` crate (`RedisRsClient`): what
/// [`Driver::name`](hermes_core::Driver::name) returns, and the `driver` of its errors.
pub const NAME: &str = "redis";

/// The driver's name on `fred` (`FredClient`), as [`NAME`] is on the `redis` crate.
pub const FRED_NAME: &str = "redis-fred";
