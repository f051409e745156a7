//! Telling running workers to stop.

mod file;
mod signal;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

pub use file::SharedFileShutdown;
pub use signal::SignalShutdown;

use crate::Error;

/// A signal that makes [`Dispatcher::handle`](crate::Dispatcher::handle) return.
///
/// The dispatcher asks [`should_shutdown`](Shutdown::should_shutdown) after every message and
/// whenever it is idle. Shutting down only makes `handle` return; restarting the worker is the
/// process manager's job.
#[async_trait]
pub trait Shutdown: Debug + Send + Sync + 'static {
    /// Whether a worker started at `started` should stop now.
    async fn should_shutdown(&self, started: SystemTime) -> Result<bool, Error>;

    /// Asks every worker started before `at` (default: now) to stop, once `at` has come.
    async fn shutdown(&self, at: Option<SystemTime>) -> Result<(), Error>;

    /// A token cancelled the moment a shutdown is requested, when the signal can say so at
    /// once; the dispatcher then stops waiting without polling. `None` by default.
    fn token(&self) -> Option<CancellationToken> {
        None
    }
}

/// A shutdown signal behind a `Box` or an `Arc` is one too, so signals chosen at run time
/// (`Box<dyn Shutdown>`) go wherever a signal does.
macro_rules! delegate_shutdown {
    ($($pointer:ident),*) => {$(
        #[async_trait]
        #[warn(clippy::missing_trait_methods)]
        impl<S: Shutdown + ?Sized> Shutdown for $pointer<S> {
            async fn should_shutdown(&self, started: SystemTime) -> Result<bool, Error> {
                (**self).should_shutdown(started).await
            }
            async fn shutdown(&self, at: Option<SystemTime>) -> Result<(), Error> {
                (**self).shutdown(at).await
            }
            fn token(&self) -> Option<CancellationToken> {
                (**self).token()
            }
        }
    )*};
}

delegate_shutdown!(Box, Arc);
