//! What happens to one delivery: the handlers, the retry copy, the acknowledgement.

use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::backoff::ErrorBackoff;
use super::controls::ControlState;
use super::limits::{LimitRules, Waits};
use super::run::{Env, HandlerMap, run_handlers};
use super::slot_cache::{SlotCache, Slots};
use super::start_cache::StartCache;
use super::{DispatcherOptions, HandlerOutcome};
use crate::bookkeeping::{Ended, RUNNING_AFTER, Tracker, settled_of};
use crate::context::Claim;
use crate::driver::Delivery;
use crate::flow::{Admission, Bound, Cancellation};
use crate::inspect::{DeadKind, DeadReason};
use crate::telemetry;
use crate::time::unix_now;
use crate::tracking::JobState;
use crate::{Driver, Error, Message, Priority, Shutdown};

/// What the workers of one `handle` call share.
pub(super) struct Context {
    /// The worker's id, as announced.
    pub(super) worker: String,
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
    /// The limits of the registered types.
    pub(super) limits: LimitRules,
    /// How long messages over a limit wait.
    pub(super) waits: Waits,
    /// The pauses and cancellations last read, and the running messages.
    pub(super) controls: ControlState,
    /// Slots of concurrency limits kept a moment after their run.
    pub(super) slot_cache: SlotCache,
    /// Starts of rates recorded ahead, not used yet.
    pub(super) start_cache: StartCache,
    /// Settles in batches and workflows of runs that end together, sent in one call.
    pub(super) settles: Arc<crate::bookkeeping::Gatherer>,
    /// What was handled, for the backend's counters (the dashboard's history).
    pub(super) history: crate::history::Recorder,
}

/// What became of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Processed {
    /// Its handlers ran (or it was settled for good without running: cancelled).
    Handled,
    /// It was put back for later without running (over a limit, paused).
    Deferred,
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

/// Runs the handlers of `delivery` unless it is cancelled, paused or over a limit, sends the
/// retry copy when one is due, and acknowledges it. Gives it back unacknowledged when the grace
/// period ends first.
pub(super) async fn process(ctx: &Context, delivery: Delivery) -> Processed {
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
        .await
}

async fn process_in_span(ctx: &Context, delivery: Delivery, span: &tracing::Span) -> Processed {
    let delivery = Arc::new(delivery);
    let message = delivery.message();
    let run = ctx.controls.run(message.id());
    if let Some(cancellation) = ctx.controls.cancellation(message.id()) {
        span.record("outcome", "cancelled");
        keep_cancelled(ctx, &delivery, &cancellation).await;
        return Processed::Handled;
    }
    if ctx.controls.priority_paused(delivery.priority()) {
        // Taken by a receive of every queue, from a paused one: given back, and the worker
        // waits for the pauses to change.
        if let Err(e) = ctx.driver.nack(&delivery).await {
            tracing::warn!("Giving back message #{} failed - {e}", message.id());
        }
        span.record("outcome", "deferred");
        let _ = tokio::time::timeout(
            crate::flow::CONTROLS_REFRESH,
            ctx.controls.changed.notified(),
        )
        .await;
        return Processed::Deferred;
    }
    if let Some(paused_for) = ctx.controls.type_paused(message.message_type()) {
        let wait = (paused_for / 4).clamp(Duration::from_secs(1), Duration::from_secs(30));
        span.record("outcome", "deferred");
        defer(ctx, &delivery, wait, true).await;
        return Processed::Deferred;
    }
    let bounds = ctx.limits.bounds(message);
    let lease = delivery
        .lease()
        .filter(|lease| !lease.is_zero())
        .unwrap_or(ctx.options.limit_lease)
        .clamp(Duration::from_secs(1), Duration::from_secs(24 * 3600));
    // Bounds of slots alone can take a slot this process kept from an earlier run.
    let only_slots = bounds.iter().all(|b| matches!(b, Bound::Slots { .. }));
    let names: Vec<String> = bounds
        .iter()
        .filter(|b| matches!(b, Bound::Slots { .. }))
        .map(|b| b.name().to_owned())
        .collect();
    let kept = if only_slots && !names.is_empty() {
        ctx.slot_cache.take(&names, lease)
    } else {
        None
    };
    // Bounds of rates alone can use a start this process recorded ahead.
    let only_starts =
        !bounds.is_empty() && bounds.iter().all(|b| matches!(b, Bound::Starts { .. }));
    let slots = match ctx.driver.limits() {
        _ if kept.is_some() => kept,
        _ if only_starts && ctx.start_cache.take(&bounds) => None,
        Some(store) if !bounds.is_empty() => {
            let holder = format!("{}/{}", message.id(), uuid::Uuid::new_v4().simple());
            let asked = Instant::now();
            let admission = if only_starts {
                let ask = ctx.start_cache.ask(&bounds);
                store
                    .admit_starts(&holder, &bounds, ask.want, ask.within)
                    .await
                    .map(|(admission, recorded)| {
                        ask.recorded(recorded, asked + ask.within);
                        admission
                    })
            } else {
                store.admit(&holder, &bounds, lease).await
            };
            match admission {
                Ok(Admission::Admitted) => {
                    ctx.waits.admitted(&bounds);
                    Some(Slots {
                        holder,
                        names,
                        until: asked + lease,
                    })
                }
                Ok(refusal) => {
                    let wait = ctx.waits.refused(&refusal);
                    span.record("outcome", "deferred");
                    defer(ctx, &delivery, wait, false).await;
                    return Processed::Deferred;
                }
                Err(e) => {
                    tracing::warn!(
                        "Checking the limits of message #{} failed, it runs later - {e}",
                        message.id()
                    );
                    span.record("outcome", "deferred");
                    defer(ctx, &delivery, Duration::from_secs(1), false).await;
                    return Processed::Deferred;
                }
            }
        }
        _ => None,
    };
    let slots = slots.filter(|s| !s.names.is_empty()).map(Mutex::new);
    handle_admitted(ctx, &delivery, span, run.token(), slots.as_ref(), lease).await;
    let Some(slots) = slots.map(|s| s.into_inner().unwrap_or_else(|e| e.into_inner())) else {
        return Processed::Handled;
    };
    if only_slots {
        // Kept a moment for the next run of these bounds here (given up once idle).
        ctx.slot_cache.put(slots);
    } else if let Some(store) = ctx.driver.limits()
        && let Err(e) = store.release(&slots.holder, &slots.names).await
    {
        tracing::warn!(
            "Giving up the limit slots of message #{} failed, they expire with their lease - {e}",
            message.id()
        );
    }
    Processed::Handled
}

/// Runs the handlers of an admitted delivery and settles it.
async fn handle_admitted(
    ctx: &Context,
    delivery: &Arc<Delivery>,
    span: &tracing::Span,
    cancel: &CancellationToken,
    slots: Option<&Mutex<Slots>>,
    lease: Duration,
) {
    let message = delivery.message();
    if done_before(ctx, delivery).await {
        return;
    }
    let tracker = tracker_of(ctx, delivery);
    let claim = Claim::new(ctx.driver.clone(), delivery.clone());
    let mut env = Env::new(&ctx.options, ctx.stop.clone(), Some(claim.clone()));
    env.cancel = cancel.clone();
    env.tracker = tracker.clone();
    let metrics = ctx.metrics.of(message.message_type());
    let waited = Duration::try_from_secs_f64(unix_now() - message.due()).unwrap_or_default();
    metrics.started(waited);
    ctx.history.waited(
        message.message_type(),
        delivery.priority(),
        waited,
        unix_now(),
    );
    let _in_progress = ctx.metrics.in_progress();
    let _running = ctx.running.start(message);
    let began = Instant::now();
    let outcome = tokio::select! {
        biased;
        () = ctx.abort.cancelled() => None,
        report = run_handlers(&ctx.handlers, message, delivery.priority(), &env) => Some(report),
        never = keep_claimed(ctx, &claim) => match never {},
        never = keep_slots(ctx, slots, lease) => match never {},
        never = mark_running(tracker.as_ref()) => match never {},
    };
    if let Some(report) = &outcome {
        let took = began.elapsed();
        let outcome = super::report::outcome_label(report.runs.iter().map(|r| &r.outcome));
        span.record("outcome", outcome);
        span.record("duration_ms", took.as_secs_f64() * 1000.0);
        metrics.handled(outcome, took);
        let failed = matches!(outcome, "failed" | "timed_out" | "panicked");
        ctx.running.finished(failed);
        ctx.history
            .handled(message.message_type(), failed, took, unix_now());
    }
    let Some(report) = outcome else {
        tracing::warn!(
            "Handling of message #{} did not finish within the grace period; it is left for redelivery",
            message.id()
        );
        if let Err(e) = ctx.driver.nack(delivery).await {
            tracing::warn!("Giving back message #{} failed - {e}", message.id());
        }
        return;
    };
    if let Some(tracker) = &tracker {
        let ended = ended_of(&report, message);
        if let Err(e) = with_retries(ctx, || tracker.end(ended.clone())).await {
            // Not settled in its group: acknowledging would leave the group waiting for it.
            let _ = ctx.driver.nack(delivery).await;
            ctx.fail(e);
            return;
        }
    }
    if report.cancelled() {
        // Not retried, not dead: done for good.
        if let Err(e) = with_retries(ctx, || ctx.driver.ack(delivery)).await {
            ctx.fail(e);
            return;
        }
        release_unique_key(ctx, message).await;
        return;
    }
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
        match with_retries(ctx, || dead_letters.add(delivery, &reason)).await {
            Ok(()) => {
                metrics.dead_lettered(reason.kind);
                release_unique_key(ctx, message).await;
            }
            Err(e) => {
                // Not kept and not acknowledged: the broker delivers it again.
                let _ = ctx.driver.nack(delivery).await;
                ctx.fail(e);
            }
        }
        return;
    }
    let retried = report.retry.is_some() || report.snoozed.is_some();
    if report.retry.is_some() {
        ctx.history.retried(message.message_type(), unix_now());
    }
    if let Some(copy) = report.snoozed {
        let sent = with_retries(ctx, || ctx.driver.send(&copy, delivery.priority())).await;
        if let Err(e) = sent {
            let _ = ctx.driver.nack(delivery).await;
            ctx.fail(e);
            return;
        }
    }
    if let Some(copy) = report.retry {
        let sent = with_retries(ctx, || ctx.driver.send(&copy, delivery.priority())).await;
        if let Err(e) = sent {
            // Without the copy, acknowledging would lose the message: leave it to the broker.
            let _ = ctx.driver.nack(delivery).await;
            ctx.fail(e);
            return;
        }
        metrics.retried();
    }
    if let Err(e) = with_retries(ctx, || ctx.driver.ack(delivery)).await {
        ctx.fail(e);
        return;
    }
    if !retried {
        release_unique_key(ctx, message).await;
    }
}

/// Puts `delivery` back to run after `wait` without running it (over a limit, or `paused`):
/// a copy due then, its retries unchanged, and the delivery acknowledged.
async fn defer(ctx: &Context, delivery: &Delivery, wait: Duration, paused: bool) {
    let message = delivery.message();
    let copy = message.later_copy(wait);
    if let Err(e) = with_retries(ctx, || ctx.driver.send(&copy, delivery.priority())).await {
        // Without the copy, acknowledging would lose the message: leave it to the broker.
        let _ = ctx.driver.nack(delivery).await;
        ctx.fail(e);
        return;
    }
    if let Err(e) = with_retries(ctx, || ctx.driver.ack(delivery)).await {
        ctx.fail(e);
        return;
    }
    let why = if paused {
        "its type is paused"
    } else {
        "over a limit"
    };
    tracing::debug!("Message #{} runs in {wait:?}: {why}", message.id());
    ctx.metrics.of(message.message_type()).deferred(paused);
}

/// Settles a cancelled `delivery` without running it: kept as a dead letter of kind
/// `cancelled` where the driver keeps them, else acknowledged.
async fn keep_cancelled(ctx: &Context, delivery: &Delivery, cancellation: &Cancellation) {
    let message = delivery.message();
    tracing::warn!(
        "Message #{} ({}) was cancelled by {}; it is not run",
        message.id(),
        message.message_type(),
        cancellation.by
    );
    if let Some(tracker) = tracker_of(ctx, delivery) {
        let ended = Ended {
            state: JobState::Cancelled,
            error: Some(format!("cancelled by {}", cancellation.by)),
            result: None,
            next_attempt: None,
        };
        if let Err(e) = with_retries(ctx, || tracker.end(ended.clone())).await {
            let _ = ctx.driver.nack(delivery).await;
            ctx.fail(e);
            return;
        }
    }
    let kept = match ctx
        .driver
        .dead_letters()
        .filter(|_| ctx.options.keep_dead_letters)
    {
        Some(dead_letters) => {
            let when =
                chrono::DateTime::<chrono::Utc>::from(crate::time::from_unix(cancellation.at))
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            let reason = DeadReason::new(
                DeadKind::Cancelled,
                format!("cancelled by {} at {when}", cancellation.by),
            )
            .with_retries(message.retries());
            with_retries(ctx, || dead_letters.add(delivery, &reason)).await
        }
        None => with_retries(ctx, || ctx.driver.ack(delivery)).await,
    };
    match kept {
        Ok(()) => {
            ctx.metrics
                .of(message.message_type())
                .dead_lettered(DeadKind::Cancelled);
            release_unique_key(ctx, message).await;
        }
        Err(e) => {
            let _ = ctx.driver.nack(delivery).await;
            ctx.fail(e);
        }
    }
}

/// The tracker of a run of `delivery`, when the driver keeps records (see [`Tracker::new`]).
fn tracker_of(ctx: &Context, delivery: &Delivery) -> Option<Arc<Tracker>> {
    Tracker::new(
        &ctx.driver,
        delivery.message(),
        delivery.priority(),
        &ctx.worker,
        ctx.options.keep_outcomes,
        &ctx.settles,
    )
}

/// What a run that ended as `report` records.
fn ended_of(report: &super::Report, message: &Message) -> Ended {
    let failure = || {
        report.first_failure().map(|outcome| match outcome {
            HandlerOutcome::Failed(error) => error.clone(),
            HandlerOutcome::Panicked(text) => format!("panicked: {text}"),
            HandlerOutcome::TimedOut(limit) => format!("timed out after {limit:?}"),
            other => format!("{other:?}"),
        })
    };
    let (state, error, next_attempt) = if report.cancelled() {
        (
            JobState::Cancelled,
            Some("cancelled while it ran".to_owned()),
            None,
        )
    } else if let Some(reason) = report.dead_reason(message) {
        (JobState::Dead, Some(reason.error), None)
    } else if let Some(copy) = &report.retry {
        (JobState::Retrying, failure(), copy.execute_at())
    } else if let Some(copy) = &report.snoozed {
        (JobState::Delayed, None, copy.execute_at())
    } else {
        (JobState::Succeeded, None, None)
    };
    Ended {
        state,
        error,
        result: report
            .result
            .clone()
            .filter(|_| state == JobState::Succeeded),
        next_attempt,
    }
}

/// Whether `delivery` is a message its group released (a callback, a step) that must not
/// run: its job is done already (a worker died between recording its end and acknowledging
/// it: it is then settled again, which is harmless), or it is a second copy of the message and
/// the other copy holds the run ([`JobStore::claim_run`](crate::driver::JobStore::claim_run)).
/// Either way it is acknowledged without running.
async fn done_before(ctx: &Context, delivery: &Delivery) -> bool {
    let message = delivery.message();
    let (Some(store), Some(group)) = (ctx.driver.jobs(), message.group()) else {
        return false;
    };
    if !crate::tracking::is_released(group, message.id()) {
        return false;
    }
    let callback = crate::tracking::is_callback(group, message.id());
    let record = match store.get(message.id()).await {
        Ok(Some(record)) if record.state.is_final() => record,
        Ok(_) => return second_copy(ctx, store, group, delivery).await,
        Err(e) => {
            tracing::warn!(
                "Reading the record of message #{} failed - {e}",
                message.id()
            );
            return false;
        }
    };
    tracing::info!(
        "Message #{} ({}) is done already ({}); it is not run again",
        message.id(),
        message.message_type(),
        record.state
    );
    let outcome = settled_of(&record);
    let settled = if callback {
        Ok(())
    } else {
        with_retries(ctx, || {
            crate::bookkeeping::settle_member(store, group, message.id(), &outcome, None)
        })
        .await
    };
    let acked = match settled {
        Ok(()) => with_retries(ctx, || ctx.driver.ack(delivery)).await,
        Err(e) => Err(e),
    };
    if let Err(e) = acked {
        let _ = ctx.driver.nack(delivery).await;
        ctx.fail(e);
    }
    true
}

/// Whether the released message of `delivery` is a copy that does not hold the run (see
/// [`done_before`]); such a copy is acknowledged. A claim that fails lets it run.
async fn second_copy(
    ctx: &Context,
    store: &dyn crate::driver::JobStore,
    group: &str,
    delivery: &Delivery,
) -> bool {
    let message = delivery.message();
    let name = &message.id()[group.len() + 1..];
    let copy = format!("{:016x}", message.created().to_bits());
    match store.claim_run(group, name, &copy).await {
        Ok(true) => false,
        Ok(false) => {
            tracing::info!(
                "Message #{} ({}) is a second copy; the other copy runs it",
                message.id(),
                message.message_type()
            );
            if let Err(e) = with_retries(ctx, || ctx.driver.ack(delivery)).await {
                let _ = ctx.driver.nack(delivery).await;
                ctx.fail(e);
            }
            true
        }
        Err(e) => {
            tracing::warn!(
                "Claiming the run of message #{} failed - {e}; it runs",
                message.id()
            );
            false
        }
    }
}

/// Records the run as running once it has gone on for [`RUNNING_AFTER`]; never returns.
async fn mark_running(tracker: Option<&Arc<Tracker>>) -> std::convert::Infallible {
    if let Some(tracker) = tracker {
        tokio::time::sleep(RUNNING_AFTER).await;
        tracker.mark_running();
    }
    std::future::pending().await
}

/// Renews the concurrency slots of a run every half lease, for as long as it is polled; never
/// returns. Idle without slots. A failed renewal is logged and tried at the next beat.
async fn keep_slots(
    ctx: &Context,
    slots: Option<&Mutex<Slots>>,
    lease: Duration,
) -> std::convert::Infallible {
    let (Some(slots), Some(store)) = (slots, ctx.driver.limits()) else {
        return std::future::pending().await;
    };
    let (holder, names, until) = {
        let slots = slots.lock().unwrap_or_else(|e| e.into_inner());
        (slots.holder.clone(), slots.names.clone(), slots.until)
    };
    // The first renewal half a lease before the hold ends (a kept slot's may end sooner).
    let mut next = until.checked_sub(lease / 2).unwrap_or_else(Instant::now);
    loop {
        tokio::time::sleep_until(next.into()).await;
        let asked = Instant::now();
        match store.renew(&holder, &names, lease).await {
            Ok(true) => {
                slots.lock().unwrap_or_else(|e| e.into_inner()).until = asked + lease;
            }
            Ok(false) => {
                // The backend let them go (their lease ended while they could not be renewed):
                // the run goes on, but they are not kept for another.
                tracing::warn!(
                    "The limit slots of {holder} expired while it ran; others may run beside it"
                );
                slots.lock().unwrap_or_else(|e| e.into_inner()).until = Instant::now();
                return std::future::pending().await;
            }
            Err(e) => tracing::warn!("Renewing the limit slots of {holder} failed - {e}"),
        }
        next = asked + lease / 2;
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
