//! What happens to one delivery: the handlers, the retry copy, the acknowledgement.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use futures_util::FutureExt;
use tokio_util::sync::CancellationToken;

use super::DispatcherOptions;
use super::backoff::ErrorBackoff;
use crate::time::unix_now;
use crate::{Delivery, Driver, Error, Handler, Message, Priority, RetryPolicy, Shutdown};

pub(super) type HandlerMap = HashMap<String, Vec<Arc<dyn Handler>>>;

/// What the workers of one `handle` call share.
pub(super) struct Context {
    pub(super) driver: Arc<dyn Driver>,
    pub(super) handlers: HandlerMap,
    pub(super) shutdowns: Vec<Arc<dyn Shutdown>>,
    pub(super) options: DispatcherOptions,
    pub(super) priorities: Vec<Priority>,
    pub(super) started: SystemTime,
    /// Messages taken so far, or reserved by a worker about to receive.
    pub(super) taken: AtomicU64,
    /// Cancelled when the grace period is over: unfinished handlers are dropped.
    pub(super) abort: CancellationToken,
    /// Cancelled to stop the receive loop (a task failed).
    pub(super) stop: CancellationToken,
    /// The first fatal error of a task.
    pub(super) failure: Mutex<Option<Error>>,
}

impl Context {
    pub(super) fn fail(&self, error: Error) {
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        failure.get_or_insert(error);
        self.stop.cancel();
    }

    pub(super) fn take_failure(&self) -> Option<Error> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

/// Runs the handlers of `delivery`, sends the retry copy when one is due, and acknowledges it.
/// Gives it back unacknowledged when the grace period ends first.
pub(super) async fn process(ctx: &Context, delivery: Delivery) {
    let message = delivery.message();
    let outcome = tokio::select! {
        biased;
        () = ctx.abort.cancelled() => None,
        retry = run_handlers(&ctx.handlers, message, delivery.priority()) => Some(retry),
        never = keep_claimed(ctx, &delivery) => match never {},
    };
    let Some(retry) = outcome else {
        tracing::warn!(
            id = message.id(),
            "Handling of message #{} did not finish within the grace period; it is left for redelivery",
            message.id()
        );
        if let Err(e) = ctx.driver.nack(&delivery).await {
            tracing::warn!("Giving back message #{} failed - {e}", message.id());
        }
        return;
    };
    if let Some(copy) = retry {
        let sent = with_retries(ctx, || ctx.driver.send(&copy, delivery.priority())).await;
        if let Err(e) = sent {
            // Without the copy, acknowledging would lose the message: leave it to the broker.
            let _ = ctx.driver.nack(&delivery).await;
            ctx.fail(e);
            return;
        }
    }
    if let Err(e) = with_retries(ctx, || ctx.driver.ack(&delivery)).await {
        ctx.fail(e);
    }
}

/// Extends the claim of `delivery` by its lease every half lease, for as long as it is polled;
/// never returns. Idle on drivers whose claims do not expire.
async fn keep_claimed(ctx: &Context, delivery: &Delivery) -> std::convert::Infallible {
    let lease = delivery
        .lease()
        .filter(|lease| !lease.is_zero() && ctx.driver.capabilities().extend);
    let Some(lease) = lease else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(lease / 2).await;
        if let Err(e) = ctx.driver.extend(delivery, lease).await {
            tracing::warn!(
                id = delivery.message().id(),
                "Extending the claim of message #{} failed - {e}",
                delivery.message().id()
            );
        }
    }
}

/// Runs `op`, retrying temporary errors with backoff until they last too long or the grace
/// period ends.
async fn with_retries<'a, F, Fut>(ctx: &'a Context, op: F) -> Result<(), Error>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), Error>> + 'a,
{
    let mut backoff = ErrorBackoff::new(&ctx.options);
    loop {
        let error = match op().await {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let Some(wait) = backoff.retry_after(&error) else {
            return Err(error);
        };
        tracing::warn!("Driver error, retrying in {wait:?} - {error}");
        tokio::select! {
            () = tokio::time::sleep(wait) => {},
            () = ctx.abort.cancelled() => return Err(error),
        }
    }
}

/// Runs every handler of the message's type in order; returns the retry copy to send, if any.
async fn run_handlers(
    handlers: &HandlerMap,
    message: &Message,
    priority: Priority,
) -> Option<Message> {
    let (id, message_type) = (message.id(), message.message_type());
    tracing::info!(
        id,
        r#type = message_type,
        priority,
        "Start handle message #{id} ({message_type}) priority:{priority}"
    );
    let handlers = handlers.get(message_type)?;
    let mut retry: Option<RetryPolicy> = None;
    for handler in handlers {
        let result = AssertUnwindSafe(handler.handle(message))
            .catch_unwind()
            .await;
        let error = match result {
            Ok(Ok(_)) => {
                tracing::info!(
                    id,
                    r#type = message_type,
                    "End handle message #{id} ({message_type})"
                );
                continue;
            }
            Ok(Err(e)) => e.to_string(),
            Err(panic) => format!("panicked: {}", panic_text(panic.as_ref())),
        };
        tracing::error!(
            id,
            r#type = message_type,
            "Handler {} throws exception - {error}",
            handler.name()
        );
        if retry.is_none() {
            retry = handler
                .retry_policy()
                .filter(|p| p.should_retry(message.retries()));
        }
    }
    let policy = retry?;
    let at = unix_now() + policy.backoff(message.retries()).as_secs_f64();
    Some(message.retry_copy((at * 1e6).round() / 1e6))
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-text panic".to_owned()
    }
}
