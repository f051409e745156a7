//! The names most programs use, for a glob import: `use hermes::prelude::*;`.

pub use crate::AnyDriver;
pub use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, Driver, Emitted, Emitter, Error, HandlerError, Job, JobContext,
    JobHandler, Message, Priority, RetryPolicy, SharedFileShutdown, Shutdown, SignalShutdown,
    Unique,
};
