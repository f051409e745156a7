//! What a driver can tell about its queues, and the dead letters it keeps: the types of the
//! inspection part of the [`Driver`](crate::Driver) contract.

use std::fmt;
use std::time::{Duration, SystemTime};

use crate::{Message, Priority};

pub use crate::paging::{
    FILTER_READS, Page, PageRequest, found_by_pages, offset_of, offset_page, peeked_page,
};

/// Where a message is on its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QueueState {
    /// Due now, waiting for a worker.
    Waiting,
    /// Due later.
    Delayed,
    /// Claimed by a worker, not yet acknowledged.
    InFlight,
    /// Kept as a dead letter: its handler failed for good, or it could not be decoded.
    Dead,
}

impl QueueState {
    /// Every state, in the order above.
    pub const ALL: [QueueState; 4] = [
        QueueState::Waiting,
        QueueState::Delayed,
        QueueState::InFlight,
        QueueState::Dead,
    ];

    /// The state's name: `waiting`, `delayed`, `in-flight` or `dead`.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueState::Waiting => "waiting",
            QueueState::Delayed => "delayed",
            QueueState::InFlight => "in-flight",
            QueueState::Dead => "dead",
        }
    }
}

impl fmt::Display for QueueState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for QueueState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        QueueState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| format!("unknown state {s:?}: one of waiting, delayed, in-flight, dead"))
    }
}

/// A figure a backend reports: exact, approximate (as SQS counts), or unknown. A backend that
/// cannot tell a figure says so; it never guesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure<T> {
    /// The figure, exactly.
    Exact(T),
    /// The figure as the backend estimates it.
    Approximate(T),
    /// The backend cannot tell.
    Unknown,
}

impl<T: Copy> Figure<T> {
    /// The figure, exact or approximate; `None` when unknown.
    pub fn value(&self) -> Option<T> {
        match self {
            Figure::Exact(v) | Figure::Approximate(v) => Some(*v),
            Figure::Unknown => None,
        }
    }

    /// Whether it is exact.
    pub fn is_exact(&self) -> bool {
        matches!(self, Figure::Exact(_))
    }
}

impl fmt::Display for Figure<u64> {
    /// `12`, `~12` for an approximate figure, `?` for an unknown one.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Figure::Exact(v) => write!(f, "{v}"),
            Figure::Approximate(v) => write!(f, "~{v}"),
            Figure::Unknown => f.write_str("?"),
        }
    }
}

/// The figures of one priority queue, from [`Inspect::stats`](crate::driver::Inspect::stats).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStats {
    /// The queue's name on the backend.
    pub name: String,
    /// Its priority.
    pub priority: Priority,
    /// Messages due now.
    pub waiting: Figure<u64>,
    /// Messages due later.
    pub delayed: Figure<u64>,
    /// Messages claimed and not yet acknowledged.
    pub in_flight: Figure<u64>,
    /// Dead letters.
    pub dead: Figure<u64>,
    /// How long the oldest waiting message has been due: the queue's latency. Zero when none
    /// is waiting.
    pub latency: Figure<Duration>,
    /// How many consumers the broker counts on the queue, for a backend that cannot list its
    /// workers but can say that much (RabbitMQ); unknown elsewhere. Drivers with
    /// the [`workers`](crate::Driver::workers) facet list their workers through
    /// [`Workers::list`](crate::driver::Workers::list) instead.
    pub consumers: Figure<u64>,
}

impl QueueStats {
    /// A queue's figures, every one unknown, for a driver to fill in.
    pub fn unknown(name: impl Into<String>, priority: Priority) -> Self {
        QueueStats {
            name: name.into(),
            priority,
            waiting: Figure::Unknown,
            delayed: Figure::Unknown,
            in_flight: Figure::Unknown,
            dead: Figure::Unknown,
            latency: Figure::Unknown,
            consumers: Figure::Unknown,
        }
    }

    /// The figure of `state`.
    pub fn count(&self, state: QueueState) -> Figure<u64> {
        match state {
            QueueState::Waiting => self.waiting,
            QueueState::Delayed => self.delayed,
            QueueState::InFlight => self.in_flight,
            QueueState::Dead => self.dead,
        }
    }
}

/// Why a message became a dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeadKind {
    /// A handler failed (an error, a panic, a time-out) and no retry was left.
    Failed,
    /// The payload does not fit the handler's job type; it cannot succeed.
    Rejected,
    /// The bytes could not be decoded as a message.
    Undecodable,
    /// The message was [cancelled](crate::flow::Cancellation) before it ran; the error says
    /// by whom and when.
    Cancelled,
}

impl DeadKind {
    /// `failed`, `rejected`, `undecodable` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeadKind::Failed => "failed",
            DeadKind::Rejected => "rejected",
            DeadKind::Undecodable => "undecodable",
            DeadKind::Cancelled => "cancelled",
        }
    }
}

impl std::str::FromStr for DeadKind {
    type Err = String;

    /// `failed`, `rejected`, `undecodable` or `cancelled`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            DeadKind::Failed,
            DeadKind::Rejected,
            DeadKind::Undecodable,
            DeadKind::Cancelled,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == s)
        .ok_or_else(|| {
            format!("unknown kind {s:?}: one of failed, rejected, undecodable, cancelled")
        })
    }
}

impl fmt::Display for DeadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why and when a message was dead-lettered: the last error, the handler, the time and the
/// retries it had.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DeadReason {
    /// What happened.
    pub kind: DeadKind,
    /// The error text (of the last failure, or the decoder's reason).
    pub error: String,
    /// The handler that failed; `None` for an undecodable message.
    pub handler: Option<String>,
    /// When, as Unix seconds.
    pub at: f64,
    /// How many times the message had been retried.
    pub retries: u32,
}

impl DeadReason {
    /// A reason of `kind` with `error`, at the current time.
    pub fn new(kind: DeadKind, error: impl Into<String>) -> Self {
        DeadReason {
            kind,
            error: error.into(),
            handler: None,
            at: crate::time::unix_now(),
            retries: 0,
        }
    }

    /// The same, naming the handler that failed.
    #[must_use]
    pub fn with_handler(mut self, handler: impl Into<String>) -> Self {
        self.handler = Some(handler.into());
        self
    }

    /// The same, with the message's retries.
    #[must_use]
    pub fn with_retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// When, as a time.
    pub fn time(&self) -> SystemTime {
        crate::time::from_unix(self.at)
    }

    /// The reason as a JSON object: `{"kind", "error", "handler", "at", "retries"}`, as the
    /// drivers that keep it beside a dead letter store it.
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "kind": self.kind.as_str(),
            "error": self.error,
            "handler": self.handler,
            "at": self.at,
            "retries": self.retries,
        })
        .to_string()
    }

    /// A reason from [`to_json`](DeadReason::to_json)'s form; `None` when `json` is not such an
    /// object. A field that is missing or of another type takes its default (an unknown kind
    /// reads as undecodable, a missing time as 0).
    ///
    /// ```
    /// use hermes_core::inspect::{DeadKind, DeadReason};
    ///
    /// let reason = DeadReason::new(DeadKind::Failed, "the disk is full").with_handler("Archiver").with_retries(3);
    /// assert_eq!(DeadReason::from_json(reason.to_json().as_bytes()), Some(reason));
    /// assert_eq!(DeadReason::from_json(b"[1]"), None);
    /// ```
    pub fn from_json(json: &[u8]) -> Option<DeadReason> {
        let value: serde_json::Value = serde_json::from_slice(json).ok()?;
        let fields = value.as_object()?;
        let text = |name: &str| fields.get(name).and_then(|v| v.as_str());
        Some(DeadReason {
            kind: text("kind")
                .and_then(|k| k.parse().ok())
                .unwrap_or(DeadKind::Undecodable),
            error: text("error").unwrap_or_default().to_owned(),
            handler: text("handler").map(str::to_owned),
            at: fields.get("at").and_then(|v| v.as_f64()).unwrap_or(0.0),
            retries: fields
                .get("retries")
                .and_then(|v| v.as_u64())
                .and_then(|r| u32::try_from(r).ok())
                .unwrap_or(0),
        })
    }
}

/// A dead letter, from [`DeadLetters::list`](crate::driver::DeadLetters::list).
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct DeadLetter {
    /// The id to replay or delete it by: the message id, or for an undecodable body one the
    /// driver gave it.
    pub id: String,
    /// The priority of the queue it came from.
    pub priority: Priority,
    /// The message; `None` for an undecodable body.
    pub message: Option<Message>,
    /// Why it is here.
    pub reason: DeadReason,
}

impl DeadLetter {
    /// A dead letter `id` of the queue of `priority`, without a message (an undecodable body);
    /// [`with_message`](DeadLetter::with_message) adds the message of one that decoded.
    pub fn new(id: impl Into<String>, priority: Priority, reason: DeadReason) -> Self {
        DeadLetter {
            id: id.into(),
            priority,
            message: None,
            reason,
        }
    }

    /// The same with the message it holds, when its body decoded: its id is then the
    /// message's.
    #[must_use]
    pub fn with_message(mut self, message: Option<Message>) -> Self {
        if let Some(message) = &message {
            self.id = message.id().to_owned();
        }
        self.message = message;
        self
    }
}

impl fmt::Debug for DeadLetter {
    /// Leaves the message's payload out, as [`Message`]'s own `Debug` does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadLetter")
            .field("id", &self.id)
            .field("priority", &self.priority)
            .field("message", &self.message)
            .field("reason", &self.reason)
            .finish()
    }
}

/// Which dead letters [`DeadLetters::replay`](crate::driver::DeadLetters::replay) puts back, and how.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Replay {
    /// Only these ids; `None` for all of them.
    pub ids: Option<Vec<String>>,
    /// Only messages of this type (undecodable ones have none and are left).
    pub message_type: Option<String>,
    /// Keep the retry count instead of resetting it to 0.
    pub keep_retries: bool,
}

impl Replay {
    /// Every dead letter, retries reset.
    pub fn all() -> Self {
        Replay::default()
    }

    /// The dead letters with these ids.
    pub fn ids(ids: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Replay {
            ids: Some(ids.into_iter().map(Into::into).collect()),
            ..Replay::default()
        }
    }

    /// Only those of `message_type`.
    #[must_use]
    pub fn of_type(mut self, message_type: impl Into<String>) -> Self {
        self.message_type = Some(message_type.into());
        self
    }

    /// Keeping their retry counts.
    #[must_use]
    pub fn keeping_retries(mut self) -> Self {
        self.keep_retries = true;
        self
    }

    /// Whether `letter` is selected.
    pub fn selects(&self, letter: &DeadLetter) -> bool {
        let id_ok = self.ids.as_ref().is_none_or(|ids| ids.contains(&letter.id));
        let type_ok = self.message_type.as_ref().is_none_or(|t| {
            letter
                .message
                .as_ref()
                .is_some_and(|m| m.message_type() == t)
        });
        id_ok && type_ok
    }

    /// The message to put back for `message`: due now, its retries reset unless kept.
    pub fn replayed(&self, message: &Message) -> Message {
        message.replay_copy(self.keep_retries)
    }
}

/// How many dead letters a driver keeps per queue, and for how long; the oldest go first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retention {
    /// At most this many per queue. Default 10,000; 0 keeps none (the SQS driver, which cannot
    /// drop exactly, refuses 0).
    pub max_count: usize,
    /// None older than this. Default 180 days.
    pub max_age: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_count: 10_000,
            max_age: Duration::from_secs(180 * 24 * 3600),
        }
    }
}
