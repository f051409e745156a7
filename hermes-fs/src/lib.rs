//! The filesystem driver of Hermes: the queue is a local directory, one JSON file per message.
//! No broker, no extension: it fits a single server, a CLI tool or a development box.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), hermes_core::Error> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use hermes_core::{Dispatcher, EchoHandler, Emitter, Message, DEFAULT_PRIORITY};
//! use hermes_fs::{FileSystemDriver, FileSystemOptions};
//!
//! let dir = std::env::temp_dir().join(format!("hermes-fs-doc-{}", std::process::id()));
//! let mut options = FileSystemOptions::default();
//! options.visibility_timeout = Duration::from_secs(60);
//! let driver = Arc::new(FileSystemDriver::with_options(&dir, "exports", options)?);
//!
//! // The web process writes a file and returns.
//! let message = Message::builder("report.export")
//!     .payload(&serde_json::json!({"report": "sales"}))
//!     .build()?;
//! Emitter::from_arc(driver.clone()).emit(&message, DEFAULT_PRIORITY).await?;
//!
//! // The worker claims the file, runs the handler, deletes the file.
//! let mut dispatcher = Dispatcher::from_arc(driver).max_items(1);
//! dispatcher.register_handler("report.export", Arc::new(EchoHandler::new()));
//! dispatcher.handle(&[]).await?;
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(()) }
//! ```
//!
//! See [`FileSystemDriver`] for the folder layout and the guarantees.

#[cfg(not(unix))]
compile_error!("hermes-fs needs a Unix system: it relies on atomic rename and inotify");

mod config;
mod driver;
mod error;
mod naming;
mod queue;
mod watch;

pub use config::FileSystemOptions;
pub use driver::FileSystemDriver;

/// The driver's name: what [`Driver::name`](hermes_core::Driver::name) returns, and the
/// `driver` of its errors.
pub const NAME: &str = "filesystem";
