//! What the flow-control facets store and answer: bounds an admission checks, its answer,
//! pauses and cancellations.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::Rate;
use crate::Priority;

/// One limit an admission checks, under a name the dispatcher gives it (the job type, and the
/// limit key for per-key limits).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Bound {
    /// At most `max` holders of the slots of `name` at once. A slot lasts its lease unless it
    /// is renewed, so the slot of a worker that died is free again when its lease ends.
    Slots {
        /// What is limited.
        name: String,
        /// How many may hold a slot at once.
        max: u32,
    },
    /// At most `rate.max()` starts of `name` in any window of `rate.period()`.
    Starts {
        /// What is limited.
        name: String,
        /// The rate.
        rate: Rate,
    },
}

impl Bound {
    /// The name of what the bound limits.
    pub fn name(&self) -> &str {
        match self {
            Bound::Slots { name, .. } | Bound::Starts { name, .. } => name,
        }
    }

    /// How many slots, or how many starts per period, it allows.
    pub fn max(&self) -> u32 {
        match self {
            Bound::Slots { max, .. } => *max,
            Bound::Starts { rate, .. } => rate.max(),
        }
    }

    /// The period of a rate; `None` for slots.
    pub fn period(&self) -> Option<Duration> {
        match self {
            Bound::Slots { .. } => None,
            Bound::Starts { rate, .. } => Some(rate.period()),
        }
    }
}

/// What [`LimitStore::admit`](crate::driver::LimitStore::admit) decided.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Admission {
    /// Every bound had room: the slots are taken and the starts recorded.
    Admitted,
    /// The bound called `name` had no room: nothing was taken.
    Refused {
        /// The name of the full bound.
        name: String,
        /// For a rate, when its oldest start leaves the window (a start is possible then);
        /// `None` for slots, which free up when a holder finishes.
        retry_after: Option<Duration>,
    },
}

/// What a pause stops: the queue of one priority, or one job type on every queue.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum PauseTarget {
    /// The queue of this priority: no worker takes a message from it.
    Priority(Priority),
    /// Messages of this type: no worker starts one; those taken are put back for later.
    Type(String),
}

impl fmt::Display for PauseTarget {
    /// `priority:<n>` or `type:<name>`, the form [`FromStr`] reads and the backends store.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PauseTarget::Priority(priority) => write!(f, "priority:{priority}"),
            PauseTarget::Type(name) => write!(f, "type:{name}"),
        }
    }
}

impl FromStr for PauseTarget {
    type Err = String;

    /// `priority:<n>` or `type:<name>` (a name of 1 to 255 bytes).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(priority) = s.strip_prefix("priority:") {
            return priority
                .parse()
                .map(PauseTarget::Priority)
                .map_err(|_| format!("{priority:?} is not a priority (a whole number)"));
        }
        match s.strip_prefix("type:") {
            Some(name) if !name.is_empty() && name.len() < 256 => {
                Ok(PauseTarget::Type(name.to_owned()))
            }
            Some(_) => Err("a job type of 1 to 255 bytes is expected after type:".to_owned()),
            None => Err(format!(
                "{:?} is neither priority:<n> nor type:<name>",
                crate::error::excerpt(s)
            )),
        }
    }
}

/// How long a cancellation is kept: 30 days. A message cancelled while due later than that
/// may run.
pub const CANCELLATIONS_KEPT: Duration = Duration::from_secs(30 * 24 * 3600);

/// A request to cancel the message `id`: a worker does not start it (it is kept as a dead
/// letter of kind [`Cancelled`](crate::inspect::DeadKind::Cancelled)), and a worker running it
/// fires its handler's cancellation token.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Cancellation {
    /// The message id.
    pub id: String,
    /// Who asked (a user, a host, a service), as they said.
    pub by: String,
    /// When, in Unix seconds.
    pub at: f64,
}

impl Cancellation {
    /// A request to cancel `id`, by `by`, now.
    pub fn new(id: impl Into<String>, by: impl Into<String>) -> Self {
        Cancellation {
            id: id.into(),
            by: by.into(),
            at: crate::time::unix_now(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_targets_read_back_what_they_write() {
        for target in [
            PauseTarget::Priority(-7),
            PauseTarget::Priority(100),
            PauseTarget::Type("send-email".into()),
            PauseTarget::Type("a:b c".into()),
        ] {
            assert_eq!(target.to_string().parse::<PauseTarget>(), Ok(target));
        }
        for bad in ["", "priority:x", "type:", "queue:7", "priority:1e3"] {
            assert!(bad.parse::<PauseTarget>().is_err(), "{bad}");
        }
    }
}
