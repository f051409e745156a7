//! What running one message's handlers came to.

use std::fmt;
use std::time::Duration;

use crate::Message;
use crate::inspect::{DeadKind, DeadReason};

/// The outcome of running one message through its handlers: one [`HandlerRun`] per handler,
/// in registration order, and the retry copy the dispatcher sends (or, from
/// [`Dispatcher::perform`](crate::Dispatcher::perform), would send).
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct Report {
    /// Each handler's run, in order; empty when no handler is registered for the type.
    pub runs: Vec<HandlerRun>,
    /// The delayed copy with `retries + 1`, when a failed handler's retry policy asks for one.
    pub retry: Option<Message>,
    /// The copy due later with its `retries` unchanged, when a handler
    /// [snoozed](crate::flow::Snooze) (and no handler failed).
    pub snoozed: Option<Message>,
    /// What the last handler that returned a value returned: the job's result, kept by id
    /// when every handler succeeded (see [`tracking`](crate::tracking)).
    pub result: Option<serde_json::Value>,
}

/// One handler's run of a message.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HandlerRun {
    /// The handler's name, as in log lines.
    pub handler: String,
    /// How it ended.
    pub outcome: HandlerOutcome,
}

/// How one handler's run ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HandlerOutcome {
    /// It did the work: `Ok(())` from a typed handler, `Ok(true)` from a [`Handler`](crate::Handler).
    Done,
    /// `Ok(false)` from a [`Handler`](crate::Handler): not done, and not to be retried.
    NotDone,
    /// It returned an error, whose text this is. Retried by the handler's policy.
    Failed(String),
    /// It panicked, with this text. Retried by the handler's policy.
    Panicked(String),
    /// It was still running at this time limit. Retried by the handler's policy.
    TimedOut(Duration),
    /// The payload does not fit the handler's job type (a missing field, a wrong type), for
    /// this reason. Never retried: it cannot succeed.
    Rejected(String),
    /// It returned a [`Snooze`](crate::flow::Snooze): the message runs again after this
    /// delay, with no retry used.
    Snoozed(Duration),
    /// The message was [cancelled](crate::flow::Cancellation) while it ran: not retried, not
    /// dead; the handlers after it do not run.
    Cancelled,
}

impl HandlerOutcome {
    /// Whether the handler did not fail: [`Done`](HandlerOutcome::Done) or
    /// [`NotDone`](HandlerOutcome::NotDone).
    pub fn is_ok(&self) -> bool {
        matches!(self, HandlerOutcome::Done | HandlerOutcome::NotDone)
    }

    /// Whether the handler failed: an error, a panic, a time-out or a rejected payload.
    pub fn is_failure(&self) -> bool {
        self.is_retryable() || matches!(self, HandlerOutcome::Rejected(_))
    }

    /// Whether the handler's retry policy applies: a failure, a panic or a time-out (not a
    /// snooze or a cancellation).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            HandlerOutcome::Failed(_) | HandlerOutcome::Panicked(_) | HandlerOutcome::TimedOut(_)
        )
    }
}

impl Report {
    /// Whether some handler is registered for the message's type.
    pub fn had_handler(&self) -> bool {
        !self.runs.is_empty()
    }

    /// Whether the message had a handler and none failed.
    pub fn succeeded(&self) -> bool {
        self.had_handler() && self.runs.iter().all(|run| run.outcome.is_ok())
    }

    /// Why the message becomes a dead letter, when it does: a handler failed and no retry copy
    /// is due. The reason names the first failed handler, its error, and the message's
    /// retries. `None` when every handler succeeded or a retry is due.
    pub fn dead_reason(&self, message: &Message) -> Option<DeadReason> {
        if self.retry.is_some() || self.cancelled() {
            return None;
        }
        let run = self.runs.iter().find(|run| run.outcome.is_failure())?;
        let (kind, error) = match &run.outcome {
            HandlerOutcome::Done
            | HandlerOutcome::NotDone
            | HandlerOutcome::Snoozed(_)
            | HandlerOutcome::Cancelled => return None,
            HandlerOutcome::Failed(error) => (DeadKind::Failed, error.clone()),
            HandlerOutcome::Panicked(text) => (DeadKind::Failed, format!("panicked: {text}")),
            HandlerOutcome::TimedOut(limit) => {
                (DeadKind::Failed, format!("timed out after {limit:?}"))
            }
            HandlerOutcome::Rejected(reason) => (DeadKind::Rejected, reason.clone()),
        };
        Some(
            DeadReason::new(kind, error)
                .with_handler(run.handler.clone())
                .with_retries(message.retries()),
        )
    }

    /// Whether the message was cancelled while it ran.
    pub fn cancelled(&self) -> bool {
        self.runs
            .iter()
            .any(|run| run.outcome == HandlerOutcome::Cancelled)
    }

    /// The first outcome that is not ok, if any.
    pub fn first_failure(&self) -> Option<&HandlerOutcome> {
        self.runs
            .iter()
            .map(|run| &run.outcome)
            .find(|outcome| !outcome.is_ok())
    }
}

impl fmt::Debug for Report {
    /// The runs, and of the retry copy its id, retries and due time only: no payload.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let retry = self.retry.as_ref().map(|m| {
            format!(
                "#{} retries:{} due:{:?}",
                m.id(),
                m.retries(),
                m.execute_at()
            )
        });
        let snoozed = self
            .snoozed
            .as_ref()
            .map(|m| format!("#{} due:{:?}", m.id(), m.execute_at()));
        f.debug_struct("Report")
            .field("runs", &self.runs)
            .field("retry", &retry)
            .field("snoozed", &snoozed)
            .field("result", &self.result.as_ref().map(|_| "<result>"))
            .finish()
    }
}

/// The `outcome` label of a message whose handlers had `outcomes`.
pub(super) fn outcome_label<'a>(
    outcomes: impl IntoIterator<Item = &'a HandlerOutcome>,
) -> &'static str {
    let mut label = "no_handler";
    for outcome in outcomes {
        let this = match outcome {
            HandlerOutcome::Panicked(_) => "panicked",
            HandlerOutcome::TimedOut(_) => "timed_out",
            HandlerOutcome::Failed(_) | HandlerOutcome::Rejected(_) => "failed",
            HandlerOutcome::Snoozed(_) => "snoozed",
            HandlerOutcome::Cancelled => "cancelled",
            HandlerOutcome::Done | HandlerOutcome::NotDone => "ok",
        };
        let rank = |l: &str| match l {
            "cancelled" => 6,
            "panicked" => 5,
            "timed_out" => 4,
            "failed" => 3,
            "snoozed" => 2,
            "ok" => 1,
            _ => 0,
        };
        if rank(this) > rank(label) {
            label = this;
        }
    }
    label
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
