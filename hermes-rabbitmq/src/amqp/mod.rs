//! The transport: the broker's nodes and connecting to them, the session on one connection
//! (its channels, and what was declared and consumed on it), and scratch channels for
//! inspections.

use std::sync::{Mutex, MutexGuard};

use hermes_core::Error;

mod declared;
mod flows;
mod nodes;
mod scratch;
mod session;

pub(crate) use declared::{Ladders, Stores};
pub(crate) use flows::Flows;
pub(crate) use nodes::{Nodes, at_host};
pub(crate) use scratch::Scratch;
pub(crate) use session::{Answer, Consuming, Published, Session, again_while_refused};

/// The guard of `mutex`, also when another holder panicked.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A lapin call as a call that cannot fail, for a bounded call: its own error is looked at
/// after.
pub(crate) async fn lift<T>(
    call: impl Future<Output = Result<T, lapin::Error>>,
) -> Result<Result<T, lapin::Error>, Error> {
    Ok(call.await)
}
