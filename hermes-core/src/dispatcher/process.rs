//! What happens to one delivery: the handlers, the retry copy, the acknowledgement.

use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::DispatcherOptions;
use super::backoff::ErrorBackoff;
use super::run::{Env, HandlerMap, run_handlers};
use crate::context::Claim;
use crate::driver::Delivery;
use crate::telemetry;
use crate::time::unix_now;
use crate::{Driver, Error, Message, Priority, Shutdown};

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
    /// The metric handles of the registered types.
    pub(super) metrics: telemetry::WorkerMetrics,
    /// The messages being handled, for the worker's announcement.
    pub(super) running: super::announce::Running,
    /// The schedulers it runs, whose entries the announcement lists.
    pub(super) schedulers: Vec<crate::Scheduler>,
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
    let span = tracing::info_span!(
        "hermes.handle",
        id = message.id(),
        r#type = message.message_type(),
        priority = delivery.priority(),
        retries = message.retries(),
        driver = ctx.driver.name(),
        traceparent = message.traceparent(),
        outcome = tracing::field::Empty,
        duration_ms = tracing::field::Empty,
    );
    // The emitter's trace goes on here: the span's parent is the remote span the message names.
    #[cfg(feature = "opentelemetry")]
    if let Some(traceparent) = message.traceparent() {
        crate::traceparent::continue_trace(&span, traceparent);
    }
    process_in_span(ctx, delivery, &span)
        .instrument(span.clone())
        .await;
}

async fn process_in_span(ctx: &Context, delivery: Delivery, span: &tracing::Span) {
    let delivery = Arc::new(delivery);
    let claim = Claim::new(ctx.driver.clone(), delivery.clone());
    let env = Env::new(&ctx.options, ctx.stop.clone(), Some(claim.clone()));
    let message = delivery.message();
    let metrics = ctx.metrics.of(message.message_type());
    metrics.started(Duration::try_from_secs_f64(unix_now() - message.due()).unwrap_or_default());
    let _in_progress = ctx.metrics.in_progress();
    let _running = ctx.running.start(message);
    let began = Instant::now();
    let outcome = tokio::select! {
        biased;
        () = ctx.abort.cancelled() => None,
        report = run_handlers(&ctx.handlers, message, delivery.priority(), &env) => Some(report),
        never = keep_claimed(ctx, &claim) => match never {},
    };
    if let Some(report) = &outcome {
        let took = began.elapsed();
        let outcome = super::report::outcome_label(report.runs.iter().map(|r| &r.outcome));
        span.record("outcome", outcome);
        span.record("duration_ms", took.as_secs_f64() * 1000.0);
        metrics.handled(outcome, took);
        ctx.running
            .finished(matches!(outcome, "failed" | "timed_out" | "panicked"));
    }
    let Some(report) = outcome else {
        tracing::warn!(
            "Handling of message #{} did not finish within the grace period; it is left for redelivery",
            message.id()
        );
        if let Err(e) = ctx.driver.nack(&delivery).await {
            tracing::warn!("Giving back message #{} failed - {e}", message.id());
        }
        return;
    };
    let dead = report
        .dead_reason(message)
        .filter(|_| ctx.options.keep_dead_letters)
        .and_then(|reason| Some((ctx.driver.dead_letters()?, reason)));
    if let Some((dead_letters, reason)) = dead {
        tracing::warn!(
            "Message #{} goes to the dead letters - {}",
            message.id(),
            reason.kind
        );
        match with_retries(ctx, || dead_letters.add(&delivery, &reason)).await {
            Ok(()) => {
                metrics.dead_lettered(reason.kind);
                release_unique_key(ctx, message).await;
            }
            Err(e) => {
                // Not kept and not acknowledged: the broker delivers it again.
                let _ = ctx.driver.nack(&delivery).await;
                ctx.fail(e);
            }
        }
        return;
    }
    let retried = report.retry.is_some();
    if let Some(copy) = report.retry {
        let sent = with_retries(ctx, || ctx.driver.send(&copy, delivery.priority())).await;
        if let Err(e) = sent {
            // Without the copy, acknowledging would lose the message: leave it to the broker.
            let _ = ctx.driver.nack(&delivery).await;
            ctx.fail(e);
            return;
        }
        metrics.retried();
    }
    if let Err(e) = with_retries(ctx, || ctx.driver.ack(&delivery)).await {
        ctx.fail(e);
        return;
    }
    if !retried {
        release_unique_key(ctx, message).await;
    }
}

/// Gives up the uniqueness key of `message`, done for good, if it holds one. A failure is
/// logged: the key then expires with its window.
async fn release_unique_key(ctx: &Context, message: &Message) {
    let Some(key) = message.unique_key() else {
        return;
    };
    let Some(unique) = ctx.driver.unique() else {
        return;
    };
    if let Err(e) = with_retries(ctx, || unique.release(key, message.id())).await {
        tracing::warn!(
            "Giving up the uniqueness key of message #{} failed, it expires with its window - {e}",
            message.id()
        );
    }
}

/// Extends the claim by its lease every half lease, for as long as it is polled; never
/// returns. Idle on drivers whose claims do not expire. A handler may lengthen the lease
/// ([`JobContext::extend_claim`](crate::JobContext::extend_claim)).
async fn keep_claimed(ctx: &Context, claim: &Claim) -> std::convert::Infallible {
    if claim.lease().is_zero() || !ctx.driver.capabilities().extend {
        return std::future::pending().await;
    }
    let delivery = &claim.delivery;
    loop {
        tokio::time::sleep(claim.lease() / 2).await;
        if let Err(e) = ctx.driver.extend(delivery, claim.lease()).await {
            tracing::warn!(
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
