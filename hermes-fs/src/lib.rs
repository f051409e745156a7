//! The filesystem driver of Hermes: the queue is a local directory, one JSON file per message.
//! No broker, no extension: it fits a single server, a CLI tool or a development box.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), hermes_core::Error> {
//! use std::time::Duration;
//! use hermes_core::{Dispatcher, Emitter, Job, JobContext};
//! use hermes_fs::{FileSystemDriver, FileSystemOptions};
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
//! let dir = std::env::temp_dir().join(format!("hermes-fs-doc-{}", std::process::id()));
//! let mut options = FileSystemOptions::default();
//! options.visibility_timeout = Duration::from_secs(60);
//! let driver = FileSystemDriver::with_options(&dir, "exports", options)?;
//!
//! // The web process writes a file and returns.
//! Emitter::new(driver.clone()).emit_job(&ExportReport { report: "sales".into() }).await?;
//!
//! // The worker claims the file, runs the handler, deletes the file.
//! let mut dispatcher = Dispatcher::new(driver).max_items(1);
//! dispatcher.register_job(export);
//! dispatcher.handle(&[]).await?;
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(()) }
//! ```
//!
//! See [`FileSystemDriver`] for the folder layout and the guarantees.

#[cfg(not(unix))]
compile_error!("hermes-fs needs a Unix system: it relies on atomic rename and inotify");

mod config;
mod controls;
mod core;
mod counters;
mod dead_letters;
mod driver;
mod error;
mod files;
mod inspect;
mod jobs;
mod limits;
mod naming;
mod receive;
mod send;
mod settle;
mod unique;
mod url;
mod workers;

pub use config::FileSystemOptions;
pub use driver::FileSystemDriver;

/// The driver's name: what [`Driver::name`](hermes_core::Driver::name) returns, and the
/// `driver` of its errors.
pub const NAME: &str = "filesystem";
