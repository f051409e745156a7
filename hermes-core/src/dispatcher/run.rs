//! Running every handler of one message: the log lines, panics, time limits and the retry copy.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio_util::sync::CancellationToken;

use super::DispatcherOptions;
use super::report::{HandlerOutcome, HandlerRun, Report};
use super::runner::{Ran, Runner};
use crate::context::Claim;
use crate::time::unix_now;
use crate::{JobContext, Message, Priority, RetryPolicy};

pub(super) type HandlerMap = HashMap<String, Vec<Arc<dyn Runner>>>;

/// Where the handlers of one message run.
pub(super) struct Env {
    /// Cancelled at shutdown; each run's token is a child of it.
    pub(super) stop: CancellationToken,
    /// Cancelled when the message is [cancelled](crate::flow::Cancellation): the running
    /// handler's token fires and the run ends as cancelled.
    pub(super) cancel: CancellationToken,
    /// The delivery, for extending its claim; none outside a worker.
    pub(super) claim: Option<Claim>,
    /// The limit of handlers that have none of their own.
    pub(super) time_limit: Option<Duration>,
    /// How long a handler past its limit may go on after its token fired.
    pub(super) time_limit_grace: Duration,
    /// The most bytes a result may take as JSON.
    pub(super) max_result_size: usize,
    /// Where a handler's progress goes; none outside a worker.
    pub(super) tracker: Option<std::sync::Arc<crate::bookkeeping::Tracker>>,
}

impl Env {
    /// Handlers run under `options`' time limits, their tokens children of `stop`.
    pub(super) fn new(
        options: &DispatcherOptions,
        stop: CancellationToken,
        claim: Option<Claim>,
    ) -> Self {
        Env {
            stop,
            cancel: CancellationToken::new(),
            claim,
            time_limit: options.time_limit,
            time_limit_grace: options.time_limit_grace,
            max_result_size: options.max_result_size,
            tracker: None,
        }
    }
}

/// Runs every handler of the message's type in order and says what came of it, with the retry
/// copy to send, if any.
pub(super) async fn run_handlers(
    handlers: &HandlerMap,
    message: &Message,
    priority: Priority,
    env: &Env,
) -> Report {
    // The message's fields are on the span around the handling (`hermes.handle`): the
    // events carry Hermes' text alone, so a log line names the message once in its fields.
    let (id, message_type) = (message.id(), message.message_type());
    tracing::info!("Start handle message #{id} ({message_type}) priority:{priority}");
    let mut report = Report {
        runs: Vec::new(),
        retry: None,
        snoozed: None,
        result: None,
    };
    let Some(handlers) = handlers.get(message_type) else {
        return report;
    };
    let mut retry: Option<RetryPolicy> = None;
    let mut snooze: Option<Duration> = None;
    for handler in handlers {
        let outcome = if env.cancel.is_cancelled() {
            HandlerOutcome::Cancelled
        } else {
            let (outcome, result) = run_one(handler.as_ref(), message, priority, env).await;
            match result.map(|value| kept_result(value, env.max_result_size)) {
                Some(Ok(value)) => {
                    report.result = Some(value);
                    outcome
                }
                Some(Err(reason)) => HandlerOutcome::Rejected(reason),
                None => outcome,
            }
        };
        let name = handler.name();
        match &outcome {
            HandlerOutcome::Snoozed(delay) => {
                tracing::info!(
                    "Handler {name} snoozed message #{id} ({message_type}) for {delay:?}"
                );
                snooze = Some(snooze.map_or(*delay, |d| d.max(*delay)));
            }
            HandlerOutcome::Cancelled => {
                tracing::warn!("Handling of message #{id} ({message_type}) was cancelled");
                report.runs.push(HandlerRun {
                    handler: name.into_owned(),
                    outcome,
                });
                return report;
            }
            HandlerOutcome::Done | HandlerOutcome::NotDone => {
                tracing::info!("End handle message #{id} ({message_type})");
            }
            HandlerOutcome::Failed(error) => {
                tracing::error!("Handler {name} throws exception - {error}");
            }
            HandlerOutcome::Panicked(text) => {
                tracing::error!("Handler {name} throws exception - panicked: {text}");
            }
            HandlerOutcome::TimedOut(limit) => {
                tracing::error!("Handler {name} timed out after {limit:?}");
            }
            HandlerOutcome::Rejected(reason) => tracing::error!(
                "Handler {name} throws exception - {reason}; not retried, it cannot succeed"
            ),
        }
        if retry.is_none() && outcome.is_retryable() {
            retry = handler
                .retry_policy()
                .filter(|p| p.should_retry(message.retries()));
        }
        report.runs.push(HandlerRun {
            handler: name.into_owned(),
            outcome,
        });
    }
    report.retry = retry.map(|policy| {
        let at = unix_now() + policy.backoff(message.retries()).as_secs_f64();
        message.retry_copy((at * 1e6).round() / 1e6)
    });
    if report.retry.is_none() && !report.runs.iter().any(|r| r.outcome.is_failure()) {
        report.snoozed = snooze.map(|delay| message.later_copy(delay));
    }
    report
}

/// `value` when its JSON fits in `max` bytes; else why it is refused.
fn kept_result(value: serde_json::Value, max: usize) -> Result<serde_json::Value, String> {
    let size = value.to_string().len();
    if size > max {
        return Err(format!(
            "its result of {size} bytes is larger than the {max} bytes a result may take"
        ));
    }
    Ok(value)
}

/// Runs one handler within its time limit; its outcome and the value it returned.
async fn run_one(
    handler: &dyn Runner,
    message: &Message,
    priority: Priority,
    env: &Env,
) -> (HandlerOutcome, Option<serde_json::Value>) {
    let limit = handler.time_limit().or(env.time_limit);
    let token = env.stop.child_token();
    let ctx = JobContext::new(message, priority, limit, token.clone(), env.claim.clone())
        .with_tracker(env.tracker.clone());
    let run = AssertUnwindSafe(handler.run(message, ctx)).catch_unwind();
    tokio::pin!(run);
    let past_limit = async {
        match limit {
            Some(limit) => tokio::time::sleep(limit).await,
            None => std::future::pending().await,
        }
    };
    let ended = tokio::select! {
        biased;
        result = &mut run => Ok(result),
        () = past_limit => Err(HandlerOutcome::TimedOut(limit.unwrap_or_default())),
        () = env.cancel.cancelled() => Err(HandlerOutcome::Cancelled),
    };
    let result = match ended {
        Ok(result) => result,
        Err(outcome) => {
            // The run has ended as `outcome`; the grace only lets it wind down.
            token.cancel();
            let _ = tokio::time::timeout(env.time_limit_grace, &mut run).await;
            return (outcome, None);
        }
    };
    if env.cancel.is_cancelled() {
        // It returned after its token fired for the cancellation (with an error, likely).
        return (HandlerOutcome::Cancelled, None);
    }
    let outcome = match result {
        Ok(Ran::Done(value)) => return (HandlerOutcome::Done, value),
        Ok(Ran::NotDone) => HandlerOutcome::NotDone,
        Ok(Ran::Failed(error)) => HandlerOutcome::Failed(error),
        Ok(Ran::Rejected(reason)) => HandlerOutcome::Rejected(reason),
        Ok(Ran::Snoozed(delay)) => HandlerOutcome::Snoozed(delay),
        Err(panic) => HandlerOutcome::Panicked(panic_text(panic.as_ref())),
    };
    (outcome, None)
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
