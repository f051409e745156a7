//! Background jobs for Rust: a web process *emits* a job into a queue and returns at once; a
//! worker *handles* it later. The queue is a directory, Redis, RabbitMQ or Amazon SQS, named by
//! a URL; the messages are those of the PHP library Hermes, so PHP and Rust processes can share
//! one queue.
//!
//! This is the crate most applications depend on: it brings the emitter, the dispatcher and
//! typed jobs of [`hermes_core`], and opens a driver for any URL of the backends its features
//! enable ([`connect`]).
//!
//! ```
//! use hermes::prelude::*;
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
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
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), hermes::Error> {
//! # let dir = std::env::temp_dir().join(format!("hermes-doc-{}", std::process::id()));
//! # let url = format!("file://{}?queue=mail", dir.display());
//! // A directory, Redis, RabbitMQ, SQS: the URL says which (`HERMES_URL`, say).
//! let driver = hermes::connect(&url).await?;
//!
//! // In the web process: queue the job and return.
//! Emitter::new(driver.clone()).emit_job(&SendEmail { to: "test@test.com".into() }).await?;
//!
//! // In the worker: run the handlers until shut down (here: after one job).
//! let mut dispatcher = Dispatcher::new(driver).max_items(1);
//! dispatcher.register_job(send_email);
//! dispatcher.handle(&[]).await?;
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(()) }
//! ```
//!
//! # Features
//!
//! | feature | backend | URLs |
//! | --- | --- | --- |
//! | `fs` (default) | a local directory, no broker (`hermes::fs`) | `file:///var/hermes?queue=jobs` |
//! | `redis` | Redis on the `redis` crate (`hermes::redis`) | `redis://`, `rediss://`, `redis+cluster://`, `redis+sentinel://` |
//! | `fred` | Redis on `fred` | the same, with `client=fred` |
//! | `rabbitmq` | RabbitMQ (`hermes::rabbitmq`) | `amqp://`, `amqps://` |
//! | `sqs` | Amazon SQS (`hermes::sqs`) | `sqs://queue-name?region=…` |
//! | `postgres` | PostgreSQL (`hermes::postgres`) | `postgres://user@host/db?queue=jobs` |
//! | `memory` | in this process, for tests (`hermes::memory`) | `memory://name` |
//! | `seal` | sealed and compressed payloads on any backend (`hermes::seal`) | |
//!
//! Each backend crate documents its URL's parameters; the `hermes` command takes the same URLs.
//! The guide (`docs/` in the repository) walks through jobs, handlers, each backend, operating
//! and testing.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod any;
mod connect;
pub mod prelude;

pub use any::AnyDriver;
pub use connect::{Connect, connect};
#[doc(inline)]
pub use hermes_core::*;

/// The filesystem driver: the queue is a local directory (see [`hermes_fs`]).
#[cfg(feature = "fs")]
#[cfg_attr(docsrs, doc(cfg(feature = "fs")))]
pub mod fs {
    #[doc(inline)]
    pub use hermes_fs::*;
}

/// The Redis driver, on the `redis` crate or on `fred` (see [`hermes_redis`]).
#[cfg(any(feature = "redis", feature = "fred"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "redis", feature = "fred"))))]
pub mod redis {
    #[doc(inline)]
    pub use hermes_redis::*;
}

/// The RabbitMQ driver (see [`hermes_rabbitmq`]).
#[cfg(feature = "rabbitmq")]
#[cfg_attr(docsrs, doc(cfg(feature = "rabbitmq")))]
pub mod rabbitmq {
    #[doc(inline)]
    pub use hermes_rabbitmq::*;
}

/// The Amazon SQS driver (see [`hermes_sqs`]).
#[cfg(feature = "sqs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
pub mod sqs {
    #[doc(inline)]
    pub use hermes_sqs::*;
}

/// The PostgreSQL driver (see [`hermes_postgres`]).
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres {
    #[doc(inline)]
    pub use hermes_postgres::*;
}

/// The in-memory driver, for tests (see [`hermes_testkit`]): `memory://name` opens the queues
/// of that name in this process, the same ones each time.
#[cfg(feature = "memory")]
#[cfg_attr(docsrs, doc(cfg(feature = "memory")))]
pub mod memory {
    #[doc(inline)]
    pub use hermes_testkit::{MemoryDriver, MemoryOptions};
}

/// Sealed and compressed payloads: a serializer that encrypts each message's payload with
/// rotating keys (see [`hermes_seal`]).
#[cfg(feature = "seal")]
#[cfg_attr(docsrs, doc(cfg(feature = "seal")))]
pub mod seal {
    #[doc(inline)]
    pub use hermes_seal::*;
}

/// The README and the guide's chapters, whose Rust code runs as this crate's doc tests.
#[cfg(doctest)]
mod guide {
    macro_rules! chapters {
        ($($name:ident = $path:literal),* $(,)?) => {$(
            #[doc = include_str!($path)]
            struct $name;
        )*};
    }

    chapters! {
        Readme = "../../README.md",
        Introduction = "../../docs/src/introduction.md",
        GettingStarted = "../../docs/src/getting-started.md",
        JobsAndHandlers = "../../docs/src/jobs-and-handlers.md",
        Backends = "../../docs/src/backends/README.md",
        Filesystem = "../../docs/src/backends/filesystem.md",
        Redis = "../../docs/src/backends/redis.md",
        RabbitMq = "../../docs/src/backends/rabbitmq.md",
        Sqs = "../../docs/src/backends/sqs.md",
        Postgres = "../../docs/src/backends/postgres.md",
        Memory = "../../docs/src/backends/memory.md",
        Operating = "../../docs/src/operating.md",
        Observing = "../../docs/src/observing.md",
        PeriodicAndUnique = "../../docs/src/periodic-and-unique.md",
        FlowControl = "../../docs/src/flow-control.md",
        ResultsAndWorkflows = "../../docs/src/results-and-workflows.md",
        Testing = "../../docs/src/testing.md",
        Php = "../../docs/src/php.md",
        SealedPayloads = "../../docs/src/sealed-payloads.md",
        Faults = "../../docs/src/faults.md",
        Guarantees = "../../docs/src/guarantees.md",
        Performance = "../../docs/src/performance.md",
        WritingADriver = "../../docs/src/writing-a-driver.md",
    }
}
