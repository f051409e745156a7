//! What Hermes reports as it works: metrics through the [`metrics`] facade, and `tracing`
//! spans. Both cost next to nothing when the application installs no recorder and no
//! subscriber.
//!
//! | metric | kind | labels |
//! | --- | --- | --- |
//! | `hermes_emitted_total` | counter | `type`, `priority` |
//! | `hermes_handled_total` | counter | `type`, `outcome`: `ok`, `failed`, `timed_out`, `panicked` or `no_handler` |
//! | `hermes_retried_total` | counter | `type` |
//! | `hermes_dead_lettered_total` | counter | `type`, `reason`: `failed` or `rejected` |
//! | `hermes_undecodable_total` | counter | (none: the driver keeps them as dead letters) |
//! | `hermes_handle_duration_seconds` | histogram | `type` |
//! | `hermes_wait_seconds` | histogram | `type`: from the due time to the start of handling |
//! | `hermes_in_progress` | gauge | |
//!
//! On the worker side `type` is the message type when a handler is registered for it, and
//! `other` when none is, so that messages of arbitrary types on the queue cannot make the
//! number of series grow without bound. A failed run ([`HandlerOutcome::Failed`]) and a
//! rejected payload ([`HandlerOutcome::Rejected`]) both count as `failed`.
//!
//! Spans: `hermes.handle` around all handlers of one message (fields `id`, `type`,
//! `priority`, `retries`, `driver`, and `outcome` and `duration_ms` once known), and
//! `hermes.emit` around each emit (`id`, `type`, `priority`, `driver`; for a batch `count`
//! instead of `id`). Hermes' log lines are emitted inside them.
//!
//! ```
//! // With a recorder installed (metrics-exporter-prometheus, say), describe the metrics once:
//! hermes_core::telemetry::describe();
//! ```

use std::time::Duration;

use crate::dispatcher::HandlerOutcome;
use crate::{DeadKind, Message, Priority};

/// Messages emitted: labels `type` and `priority`.
pub const EMITTED_TOTAL: &str = "hermes_emitted_total";
/// Messages handled: labels `type` and `outcome`.
pub const HANDLED_TOTAL: &str = "hermes_handled_total";
/// Retry copies sent: label `type`.
pub const RETRIED_TOTAL: &str = "hermes_retried_total";
/// Messages that became dead letters: labels `type` and `reason`.
pub const DEAD_LETTERED_TOTAL: &str = "hermes_dead_lettered_total";
/// Undecodable messages a worker met.
pub const UNDECODABLE_TOTAL: &str = "hermes_undecodable_total";
/// How long the handlers of a message took, in seconds: label `type`.
pub const HANDLE_DURATION_SECONDS: &str = "hermes_handle_duration_seconds";
/// How long a message waited from its due time to the start of its handling, in seconds:
/// label `type`.
pub const WAIT_SECONDS: &str = "hermes_wait_seconds";
/// Messages being handled now.
pub const IN_PROGRESS: &str = "hermes_in_progress";

/// The `type` label of a message type that no handler is registered for.
pub const OTHER_TYPE: &str = "other";

/// Describes every metric to the installed recorder (units and help texts). Call it once after
/// installing one; without a recorder it does nothing.
pub fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(EMITTED_TOTAL, "Messages emitted");
    describe_counter!(HANDLED_TOTAL, "Messages handled, by outcome");
    describe_counter!(RETRIED_TOTAL, "Retry copies sent");
    describe_counter!(DEAD_LETTERED_TOTAL, "Messages that became dead letters");
    describe_counter!(UNDECODABLE_TOTAL, "Undecodable messages met by workers");
    describe_histogram!(
        HANDLE_DURATION_SECONDS,
        Unit::Seconds,
        "How long the handlers of a message took"
    );
    describe_histogram!(
        WAIT_SECONDS,
        Unit::Seconds,
        "From a message's due time to the start of its handling"
    );
    describe_gauge!(IN_PROGRESS, "Messages being handled now");
}

/// The `outcome` label of a message whose handlers had `outcomes`.
pub(crate) fn outcome_label<'a>(
    outcomes: impl IntoIterator<Item = &'a HandlerOutcome>,
) -> &'static str {
    let mut label = "no_handler";
    for outcome in outcomes {
        let this = match outcome {
            HandlerOutcome::Panicked(_) => "panicked",
            HandlerOutcome::TimedOut(_) => "timed_out",
            HandlerOutcome::Failed(_) | HandlerOutcome::Rejected(_) => "failed",
            _ => "ok",
        };
        let rank = |l: &str| match l {
            "panicked" => 4,
            "timed_out" => 3,
            "failed" => 2,
            "ok" => 1,
            _ => 0,
        };
        if rank(this) > rank(label) {
            label = this;
        }
    }
    label
}

pub(crate) fn emitted(message: &Message, priority: Priority) {
    metrics::counter!(
        EMITTED_TOTAL,
        "type" => message.message_type().to_owned(),
        "priority" => priority.to_string()
    )
    .increment(1);
}

pub(crate) fn started(message_type: &str, waited: Duration) {
    metrics::histogram!(WAIT_SECONDS, "type" => message_type.to_owned()).record(waited);
    metrics::gauge!(IN_PROGRESS).increment(1.0);
}

/// Ends the in-progress count of one message when dropped, however its handling ends.
pub(crate) struct InProgress;

impl Drop for InProgress {
    fn drop(&mut self) {
        metrics::gauge!(IN_PROGRESS).decrement(1.0);
    }
}

pub(crate) fn handled(message_type: &str, outcome: &'static str, took: Duration) {
    metrics::counter!(HANDLED_TOTAL, "type" => message_type.to_owned(), "outcome" => outcome)
        .increment(1);
    metrics::histogram!(HANDLE_DURATION_SECONDS, "type" => message_type.to_owned()).record(took);
}

pub(crate) fn retried(message_type: &str) {
    metrics::counter!(RETRIED_TOTAL, "type" => message_type.to_owned()).increment(1);
}

pub(crate) fn dead_lettered(message_type: &str, reason: DeadKind) {
    metrics::counter!(
        DEAD_LETTERED_TOTAL,
        "type" => message_type.to_owned(),
        "reason" => reason.as_str()
    )
    .increment(1);
}

pub(crate) fn undecodable() {
    metrics::counter!(UNDECODABLE_TOTAL).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_outcome_of_the_handlers_names_the_message() {
        assert_eq!(outcome_label([]), "no_handler");
        assert_eq!(outcome_label([&HandlerOutcome::Done]), "ok");
        assert_eq!(
            outcome_label([
                &HandlerOutcome::Done,
                &HandlerOutcome::Rejected("x".into()),
                &HandlerOutcome::NotDone
            ]),
            "failed"
        );
        assert_eq!(
            outcome_label([
                &HandlerOutcome::Panicked("p".into()),
                &HandlerOutcome::TimedOut(Duration::from_secs(1))
            ]),
            "panicked"
        );
    }
}
