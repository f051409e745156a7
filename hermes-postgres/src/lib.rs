//! The PostgreSQL driver of Hermes: jobs are rows of a table beside the application's data,
//! claimed with `FOR UPDATE SKIP LOCKED` and leased for a visibility timeout; `LISTEN`/`NOTIFY`
//! wakes idle workers when a row commits.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), hermes_core::Error> {
//! use hermes_core::{Dispatcher, Emitter, Job, JobContext};
//! use hermes_postgres::PostgresDriver;
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct SendWelcome {
//!     user: u64,
//! }
//! impl Job for SendWelcome {
//!     const TYPE: &'static str = "mail.welcome";
//! }
//!
//! async fn welcome(job: SendWelcome, _: JobContext) -> Result<(), std::io::Error> {
//!     println!("welcoming user {}", job.user);
//!     Ok(())
//! }
//!
//! let driver = PostgresDriver::from_url("postgres://postgres@127.0.0.1:5432/test?queue=mails").await?;
//!
//! // The web process inserts a row and returns.
//! Emitter::new(driver.clone()).emit_job(&SendWelcome { user: 42 }).await?;
//!
//! // The worker claims the row, runs the handler, deletes the row.
//! let mut dispatcher = Dispatcher::new(driver).max_items(1);
//! dispatcher.register_job(welcome);
//! dispatcher.handle(&[]).await?;
//! # Ok(()) }
//! ```
//!
//! See [`PostgresDriver`] for the table and the guarantees.

mod client;
mod config;
mod controls;
mod core;
mod counters;
mod dead_letters;
mod driver;
mod emit_in;
mod error;
mod inspect;
mod jobs;
mod limits;
mod migrate;
mod naming;
mod pages;
mod prune;
mod receive;
mod send;
mod settle;
mod unique;
mod url;
mod workers;

pub use config::PostgresOptions;
pub use driver::PostgresDriver;
pub use emit_in::{EmitStatement, EmitTarget, SqlValue};
pub use migrate::SCHEMA_VERSION;
pub use settle::ACK_DELAY;

/// The driver's name in logs and errors.
pub const NAME: &str = "postgres";
