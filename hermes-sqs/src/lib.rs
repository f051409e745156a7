//! The Amazon SQS driver of Hermes, on `aws-sdk-sqs`: Hermes' behaviour (the queue created or
//! found by name on first use, the body Hermes' JSON unchanged, long polling, deletion only
//! after the handlers ran), plus delays of any length, priorities as one queue per priority,
//! visibility extension for slow handlers, dead letters (failed and undecodable messages) in
//! one dead-letter queue, and SQS's approximate counts.
//!
//! You build the SQS client as for any AWS SDK program, usually with `aws-config`; point its
//! endpoint elsewhere for an SQS-compatible server. This crate enables no HTTP client or TLS
//! stack of its own: `aws-config` with its default features brings the SDK's HTTPS client.
//! [`SqsDriver::from_url`] builds the client itself, from a URL such as
//! `sqs://hermes?region=eu-west-1` and the AWS default credentials chain, with rustls.
//!
//! ```no_run
//! # #[tokio::main]
//! # async fn main() -> Result<(), hermes_core::Error> {
//! use std::collections::HashMap;
//! use hermes_core::{Dispatcher, Emitter, Job, JobContext};
//! use hermes_sqs::SqsDriver;
//! use hermes_sqs::aws_sdk_sqs::{self, types::QueueAttributeName};
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
//! // Region and credentials from the environment, as every AWS SDK program.
//! let config = aws_config::load_from_env().await;
//! let client = aws_sdk_sqs::Client::new(&config);
//! let attributes = HashMap::from([(QueueAttributeName::VisibilityTimeout, "300".to_owned())]);
//! let driver = SqsDriver::new(client, "hermes", attributes)?;
//!
//! // The web process sends the job and returns.
//! Emitter::new(driver.clone()).emit_job(&ExportReport { report: "sales".into() }).await?;
//!
//! // The worker long-polls the queue and deletes each message after its handlers ran.
//! let mut dispatcher = Dispatcher::new(driver);
//! dispatcher.register_job(export);
//! dispatcher.handle(&[]).await?;
//! # Ok(()) }
//! ```
//!
//! See [`SqsDriver`] for the guarantees and [`SqsOptions`] for the settings.

mod api;
mod config;
mod core;
mod dead_letters;
mod delay;
mod driver;
mod error;
mod inspect;
mod naming;
mod queues;
mod receive;
mod send;
mod settle;
mod url;

pub use config::{MAX_BATCH_SIZE, MAX_DELAY, MAX_WAIT_TIME, SqsOptions};
pub use dead_letters::{
    AT_ATTRIBUTE, ERROR_ATTRIBUTE, HANDLER_ATTRIBUTE, KIND_ATTRIBUTE, MAX_ERROR_LEN,
    QUEUE_ATTRIBUTE, RETRIES_ATTRIBUTE,
};
pub use driver::SqsDriver;
pub use naming::{
    DELAY_SUFFIX, MAX_QUEUE_NAME_LEN, QUARANTINE_SUFFIX, delay_queue, quarantine_queue,
};

/// The driver's name: what [`Driver::name`](hermes_core::Driver::name) returns, and the
/// `driver` of its errors.
pub const NAME: &str = "sqs";

/// The SDK this driver is built on, re-exported so that the client you pass in is of the same
/// version.
pub use aws_sdk_sqs;
