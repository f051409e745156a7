//! What Hermes reports as it works: metrics through the [`metrics`] facade, and `tracing`
//! spans. Both cost next to nothing when the application installs no recorder and no
//! subscriber.
//!
//! | metric | kind | labels |
//! | --- | --- | --- |
//! | `hermes_emitted_total` | counter | `type`, `priority` |
//! | `hermes_handled_total` | counter | `type`, `outcome`: `ok`, `failed`, `timed_out`, `panicked`, `snoozed`, `cancelled` or `no_handler` |
//! | `hermes_retried_total` | counter | `type` |
//! | `hermes_dead_lettered_total` | counter | `type`, `reason`: `failed`, `rejected` or `cancelled` |
//! | `hermes_deferred_total` | counter | `type`, `reason`: `limit` (over a [limit](crate::flow::Limits)) or `paused`: put back for later without running |
//! | `hermes_paused` | gauge | `target` (`priority:<n>`, `type:<name>`): 1 while paused, as a worker last read it |
//! | `hermes_undecodable_total` | counter | (none: the driver keeps them as dead letters) |
//! | `hermes_handle_duration_seconds` | histogram | `type` |
//! | `hermes_wait_seconds` | histogram | `type`: from the due time to the start of handling |
//! | `hermes_in_progress` | gauge | |
//!
//! On the worker side `type` is the message type when a handler is registered for it, and
//! `other` when none is, so that messages of arbitrary types on the queue cannot make the
//! number of series grow without bound. A failed run ([`HandlerOutcome::Failed`](crate::HandlerOutcome::Failed)) and a
//! rejected payload ([`HandlerOutcome::Rejected`](crate::HandlerOutcome::Rejected)) both count as `failed`.
//!
//! Spans: `hermes.handle` around all handlers of one message (fields `id`, `type`,
//! `priority`, `retries`, `driver`, `traceparent` when the message has one, and `outcome` and
//! `duration_ms` once known), and
//! `hermes.emit` around each emit (`id`, `type`, `priority`, `driver`; for a batch `count`
//! instead of `id`). Hermes' log lines are emitted inside them.
//!
//! Trace context: a message may carry a W3C `traceparent`
//! ([`Message::traceparent`](crate::Message::traceparent)), an extra JSON key PHP's decoder
//! ignores. `hermes.handle` records it as its `traceparent` field, so logs of the worker can be
//! matched to the emitter's trace. With the `opentelemetry` feature (off by default, adding the
//! `opentelemetry` and `tracing-opentelemetry` dependencies), `Emitter::propagate_trace(true)`
//! puts the trace context of the `hermes.emit` span in each message that has none, when the
//! subscriber has a `tracing-opentelemetry` layer; and a worker makes the remote span a
//! message names the parent of its `hermes.handle` span, so the handling continues the
//! emitter's trace. Without the feature the traceparent is carried through untouched and none
//! of this is compiled.
//!
//! ```
//! // With a recorder installed (metrics-exporter-prometheus, say), describe the metrics once:
//! hermes_core::telemetry::describe();
//! ```

use std::collections::HashMap;
use std::time::Duration;

use crate::inspect::DeadKind;
use crate::{Message, Priority};

/// Messages emitted: labels `type` and `priority`.
pub const EMITTED_TOTAL: &str = "hermes_emitted_total";
/// Messages handled: labels `type` and `outcome`.
pub const HANDLED_TOTAL: &str = "hermes_handled_total";
/// Retry copies sent: label `type`.
pub const RETRIED_TOTAL: &str = "hermes_retried_total";
/// Messages that became dead letters: labels `type` and `reason`.
pub const DEAD_LETTERED_TOTAL: &str = "hermes_dead_lettered_total";
/// Messages put back for later without running (over a limit, or of a paused type): labels
/// `type` and `reason`.
pub const DEFERRED_TOTAL: &str = "hermes_deferred_total";
/// 1 while the target (label `target`) is paused, as a worker last read it.
pub const PAUSED: &str = "hermes_paused";
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
    describe_counter!(
        DEFERRED_TOTAL,
        "Messages put back for later without running (over a limit, or paused)"
    );
    describe_gauge!(PAUSED, "1 while the target is paused");
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

/// The most `(type, priority)` keys of `hermes_emitted_total` a thread keeps built; a thread
/// that emits more kinds builds the others at each emit.
const EMITTED_KEYS_KEPT: usize = 32;

thread_local! {
    /// The keys of `hermes_emitted_total` this thread built, so an emit builds none.
    static EMITTED_KEYS: std::cell::RefCell<Vec<(Priority, metrics::Key)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

pub(crate) fn emitted(message: &Message, priority: Priority) {
    static METADATA: metrics::Metadata<'static> =
        metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));
    let message_type = message.message_type();
    let increment = |key: &metrics::Key| {
        metrics::with_recorder(|recorder| recorder.register_counter(key, &METADATA).increment(1));
    };
    let build = || {
        metrics::Key::from_parts(
            EMITTED_TOTAL,
            vec![
                metrics::Label::new("type", message_type.to_owned()),
                metrics::Label::new("priority", priority.to_string()),
            ],
        )
    };
    // Without the thread's keys (a recorder that emits from inside, or a thread ending), the
    // key is built for this emit alone.
    let cached = EMITTED_KEYS.try_with(|keys| {
        let Ok(mut keys) = keys.try_borrow_mut() else {
            return false;
        };
        let kept = keys.iter().find(|(p, key)| {
            *p == priority
                && key
                    .labels()
                    .any(|l| l.key() == "type" && l.value() == message_type)
        });
        match kept {
            Some((_, key)) => increment(key),
            None => {
                let key = build();
                increment(&key);
                if keys.len() < EMITTED_KEYS_KEPT {
                    keys.push((priority, key));
                }
            }
        }
        true
    });
    if cached != Ok(true) {
        increment(&build());
    }
}

/// The outcomes, in the order of [`TypeMetrics::handled`].
const OUTCOMES: [&str; 7] = [
    "ok",
    "failed",
    "timed_out",
    "panicked",
    "snoozed",
    "cancelled",
    "no_handler",
];

/// The metric handles of one message type, registered once when a worker starts, so handling a
/// message costs no label allocation (and next to nothing without a recorder).
pub(crate) struct TypeMetrics {
    handled: [metrics::Counter; 7],
    duration: metrics::Histogram,
    wait: metrics::Histogram,
    retried: metrics::Counter,
    dead_failed: metrics::Counter,
    dead_rejected: metrics::Counter,
    dead_cancelled: metrics::Counter,
    deferred_limit: metrics::Counter,
    deferred_paused: metrics::Counter,
}

impl TypeMetrics {
    fn new(message_type: &str) -> Self {
        let label = || message_type.to_owned();
        TypeMetrics {
            handled: OUTCOMES
                .map(|o| metrics::counter!(HANDLED_TOTAL, "type" => label(), "outcome" => o)),
            duration: metrics::histogram!(HANDLE_DURATION_SECONDS, "type" => label()),
            wait: metrics::histogram!(WAIT_SECONDS, "type" => label()),
            retried: metrics::counter!(RETRIED_TOTAL, "type" => label()),
            dead_failed: metrics::counter!(DEAD_LETTERED_TOTAL, "type" => label(), "reason" => "failed"),
            dead_rejected: metrics::counter!(DEAD_LETTERED_TOTAL, "type" => label(), "reason" => "rejected"),
            dead_cancelled: metrics::counter!(DEAD_LETTERED_TOTAL, "type" => label(), "reason" => "cancelled"),
            deferred_limit: metrics::counter!(DEFERRED_TOTAL, "type" => label(), "reason" => "limit"),
            deferred_paused: metrics::counter!(DEFERRED_TOTAL, "type" => label(), "reason" => "paused"),
        }
    }

    pub(crate) fn started(&self, waited: Duration) {
        self.wait.record(waited);
    }

    pub(crate) fn handled(&self, outcome: &'static str, took: Duration) {
        if let Some(i) = OUTCOMES.iter().position(|o| *o == outcome) {
            self.handled[i].increment(1);
        }
        self.duration.record(took);
    }

    /// Counts a message put back without running: over a limit, or paused.
    pub(crate) fn deferred(&self, paused: bool) {
        if paused {
            self.deferred_paused.increment(1);
        } else {
            self.deferred_limit.increment(1);
        }
    }

    pub(crate) fn retried(&self) {
        self.retried.increment(1);
    }

    pub(crate) fn dead_lettered(&self, reason: DeadKind) {
        match reason {
            DeadKind::Rejected => self.dead_rejected.increment(1),
            DeadKind::Cancelled => self.dead_cancelled.increment(1),
            _ => self.dead_failed.increment(1),
        }
    }
}

/// The metric handles of a worker: one set per registered message type and one for all
/// others.
pub(crate) struct WorkerMetrics {
    by_type: HashMap<String, TypeMetrics>,
    other: TypeMetrics,
    in_progress: metrics::Gauge,
    undecodable: metrics::Counter,
}

impl WorkerMetrics {
    /// Handles for `types`, registered with the recorder installed now.
    pub(crate) fn new<'a>(types: impl IntoIterator<Item = &'a String>) -> Self {
        WorkerMetrics {
            by_type: types
                .into_iter()
                .map(|t| (t.clone(), TypeMetrics::new(t)))
                .collect(),
            other: TypeMetrics::new(OTHER_TYPE),
            in_progress: metrics::gauge!(IN_PROGRESS),
            undecodable: metrics::counter!(UNDECODABLE_TOTAL),
        }
    }

    /// The handles of `message_type`, or of `other` when no handler is registered for it.
    pub(crate) fn of(&self, message_type: &str) -> &TypeMetrics {
        self.by_type.get(message_type).unwrap_or(&self.other)
    }

    /// Counts one message in progress until the guard drops, however its handling ends.
    pub(crate) fn in_progress(&self) -> InProgress<'_> {
        self.in_progress.increment(1.0);
        InProgress(&self.in_progress)
    }

    pub(crate) fn undecodable(&self) {
        self.undecodable.increment(1);
    }
}

/// One message in progress, until dropped.
pub(crate) struct InProgress<'a>(&'a metrics::Gauge);

impl Drop for InProgress<'_> {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// Records that the driver `driver` has `message`, on the queue of `priority`, as an emit
/// does: the emitted-messages count, and the info line
/// `Emitter send message #<id> to driver <driver>` (with the payload when `log_payloads`).
/// For a driver that queues messages on the application's behalf outside an
/// [`Emitter`](crate::Emitter) (inside the application's own database transaction, say).
pub fn record_sent(message: &Message, priority: Priority, driver: &str, log_payloads: bool) {
    emitted(message, priority);
    if log_payloads {
        tracing::info!(
            id = message.id(),
            created = message.created(),
            r#type = message.message_type(),
            payload = %message.payload().map_or_else(|| "null".to_owned(), ToString::to_string),
            "Emitter send message #{} to driver {driver}",
            message.id(),
        );
    } else {
        tracing::info!(
            id = message.id(),
            created = message.created(),
            r#type = message.message_type(),
            "Emitter send message #{} to driver {driver}",
            message.id(),
        );
    }
}
