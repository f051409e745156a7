//! Work a driver must finish even when the call that started it is dropped.
//!
//! A `receive` that claimed messages must record them before it returns, or a dropped
//! `receive` would leave them claimed by nobody until the visibility timeout. Running that
//! part in a task of its own keeps it going whatever happens to the caller's future.

use std::future::Future;

use tokio::task::JoinHandle;

/// Waits for the task `handle`; a panic in the task goes on in the caller, as if the work had
/// run there.
///
/// # Panics
/// When the task panicked, or was cancelled (its runtime is shutting down).
///
/// # Cancellation safety
/// Dropping the future leaves the task running to its end.
pub async fn join<T>(handle: JoinHandle<T>) -> T {
    match handle.await {
        Ok(value) => value,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(error) => panic!("a driver task was cancelled: {error}"),
    }
}

/// Runs `work` in a task of its own and waits for it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let claimed = hermes_core::driver::task::detached(async { 3 }).await;
/// assert_eq!(claimed, 3);
/// # }
/// ```
///
/// # Panics
/// When `work` panics (the panic goes on in the caller), or its runtime is shutting down.
///
/// # Cancellation safety
/// Dropping the future does not stop `work`: it runs to its end, so what it claimed or wrote
/// is recorded for the next call.
pub async fn detached<T: Send + 'static>(work: impl Future<Output = T> + Send + 'static) -> T {
    join(tokio::spawn(work)).await
}

/// Runs the blocking `work` on the runtime's blocking threads and waits for it.
///
/// # Panics
/// When `work` panics (the panic goes on in the caller), or its runtime is shutting down.
///
/// # Cancellation safety
/// Dropping the future does not stop `work`: it runs to its end.
pub async fn detached_blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    join(tokio::task::spawn_blocking(work)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    #[should_panic(expected = "the work's own panic")]
    async fn a_panic_stays_a_panic() {
        detached(async { panic!("the work's own panic") }).await;
    }

    #[tokio::test]
    async fn dropped_work_goes_on() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let call = detached(async move {
            tokio::task::yield_now().await;
            tx.send(7).unwrap();
        });
        // Start it, then drop the caller's future.
        let _ = tokio::time::timeout(std::time::Duration::ZERO, call).await;
        assert_eq!(rx.await.unwrap(), 7);
    }

    #[tokio::test]
    async fn blocking_work_returns_its_value() {
        assert_eq!(detached_blocking(|| 2 + 2).await, 4);
    }
}
