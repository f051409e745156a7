//! Batches: jobs emitted as one group, with callbacks that run once when every job is done.

use serde::{Deserialize, Serialize};

use super::group::{GroupKind, GroupSpec, GroupState, Planned, Tally};
use super::{ON_COMPLETE, ON_SUCCESS};
use crate::{Error, Job, Message, Priority};

/// A batch about to be opened: its callbacks, its description and the batch it belongs to.
/// Open it with [`Emitter::emit_batch_of`](crate::Emitter::emit_batch_of) (its jobs at once) or
/// [`Emitter::open_batch`](crate::Emitter::open_batch) (jobs added as they come).
///
/// A callback is a job like any other, sent once when the last job of the batch is done
/// (succeeded, or failed for good): **on success** when every job succeeded, **on complete**
/// whatever became of them. It runs with the batch's id as its
/// [`group`](crate::JobContext::group), and reads the counts with
/// [`Emitter::batch_status`](crate::Emitter::batch_status).
///
/// ```
/// use hermes_core::tracking::Batch;
/// # #[derive(serde::Serialize, serde::Deserialize)]
/// # struct MailReport { to: String }
/// # impl hermes_core::Job for MailReport { const TYPE: &'static str = "mail-report"; }
///
/// let batch = Batch::new()
///     .on_complete(&MailReport { to: "ops@example.com".into() })
///     .description("import of 2026-12-06");
/// assert!(!batch.id().is_empty());
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Batch {
    pub(crate) id: String,
    on_success: Option<Box<Planned>>,
    on_complete: Option<Box<Planned>>,
    description: Option<String>,
    pub(crate) parent: Option<String>,
    error: Option<String>,
}

impl Default for Batch {
    fn default() -> Self {
        Batch::new()
    }
}

impl Batch {
    /// A batch with a fresh id, no callbacks.
    pub fn new() -> Self {
        Batch {
            id: uuid::Uuid::new_v4().to_string(),
            on_success: None,
            on_complete: None,
            description: None,
            parent: None,
            error: None,
        }
    }

    /// The batch's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Sends `job` once every job of the batch succeeded.
    pub fn on_success<J: Job>(mut self, job: &J) -> Self {
        self.on_success = self.planned(job);
        self
    }

    /// Sends `job` once every job of the batch is done, whatever became of them.
    pub fn on_complete<J: Job>(mut self, job: &J) -> Self {
        self.on_complete = self.planned(job);
        self
    }

    /// Sends `message` on `priority` once every job of the batch succeeded (a callback of
    /// another language, or a type without a [`Job`]).
    pub fn on_success_message(mut self, message: &Message, priority: Priority) -> Self {
        self.on_success = Some(Box::new(Planned::of(message, priority)));
        self
    }

    /// Sends `message` on `priority` once every job of the batch is done.
    pub fn on_complete_message(mut self, message: &Message, priority: Priority) -> Self {
        self.on_complete = Some(Box::new(Planned::of(message, priority)));
        self
    }

    /// What the application calls the batch (shown by `hermes batch`).
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Makes this batch a member of the batch `parent`, which is then done only once this
    /// one is. `parent` must be open, or have a job that is not done yet (the job adding
    /// this batch, say).
    pub fn within(mut self, parent: impl Into<String>) -> Self {
        self.parent = Some(parent.into());
        self
    }

    fn planned<J: Job>(&mut self, job: &J) -> Option<Box<Planned>> {
        match Message::from_job(job) {
            Ok(message) => Some(Box::new(Planned::of(&message, J::PRIORITY))),
            Err(e) => {
                self.error
                    .get_or_insert(format!("a callback of batch {}: {e}", self.id));
                None
            }
        }
    }

    /// The spec to open, or the first error met while building.
    pub(crate) fn spec(&self) -> Result<GroupSpec, Error> {
        if let Some(error) = &self.error {
            return Err(Error::InvalidMessage(error.clone()));
        }
        if let Some(parent) = &self.parent {
            super::check_group_id(parent).map_err(Error::Group)?;
        }
        Ok(GroupSpec {
            id: self.id.clone(),
            kind: GroupKind::Batch {
                on_success: self.on_success.clone(),
                on_complete: self.on_complete.clone(),
            },
            parent: self.parent.clone(),
            description: self.description.clone(),
            created: crate::time::unix_now(),
        })
    }
}

/// Where a callback of a batch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallbackState {
    /// The batch has no such callback.
    None,
    /// Not sent: the batch is not done (or, for on success, not every job succeeded).
    Waiting,
    /// Sent; not done yet.
    Sent,
    /// Sent, and its job is done ([`Emitter::status`](crate::Emitter::status) of
    /// [`BatchStatus::callback_id`] says how).
    Done,
}

/// A batch now: its counts and its callbacks.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BatchStatus {
    /// The batch's id.
    pub id: String,
    /// What the application calls it.
    pub description: Option<String>,
    /// The batch it belongs to.
    pub parent: Option<String>,
    /// Whether jobs may still be added from outside ([`OpenBatch::close`](crate::OpenBatch::close) was not called).
    pub open: bool,
    /// Jobs (and nested batches) added.
    pub total: u64,
    /// Those not done yet.
    pub pending: u64,
    /// Those that succeeded.
    pub succeeded: u64,
    /// Those that failed for good (or were cancelled).
    pub failed: u64,
    /// The on-success callback.
    pub on_success: CallbackState,
    /// The on-complete callback.
    pub on_complete: CallbackState,
    /// When it was created, in Unix seconds.
    pub created: f64,
    /// When its last job was done, in Unix seconds.
    pub finished: Option<f64>,
}

impl BatchStatus {
    /// The message id of the callback `name` ([`ON_SUCCESS`] or [`ON_COMPLETE`]) of the batch
    /// `batch`.
    pub fn callback_id(batch: &str, name: &str) -> String {
        super::member_id(batch, name)
    }

    /// The status of the batch in `state`; `open` says whether its opener is still pending,
    /// and `done` which callbacks are done.
    pub(crate) fn from_state(state: &GroupState, open: bool, done: [bool; 2]) -> Option<Self> {
        let GroupKind::Batch {
            on_success,
            on_complete,
        } = &state.spec.kind
        else {
            return None;
        };
        // The opener is a member of its own: not one of the batch's jobs.
        let opener = Tally::new(1, u64::from(!open), 0);
        let tally = Tally::new(
            state.tally.total.saturating_sub(opener.total),
            state.tally.succeeded.saturating_sub(opener.succeeded),
            state.tally.failed,
        );
        let callback = |planned: &Option<Box<Planned>>, name: &str, done: bool| match planned {
            None => CallbackState::None,
            Some(_) if done => CallbackState::Done,
            Some(_) if state.released.iter().any(|n| n == name) => CallbackState::Sent,
            Some(_) => CallbackState::Waiting,
        };
        Some(BatchStatus {
            id: state.spec.id.clone(),
            description: state.spec.description.clone(),
            parent: state.spec.parent.clone(),
            open,
            total: tally.total,
            pending: tally.pending(),
            succeeded: tally.succeeded,
            failed: tally.failed,
            on_success: callback(on_success, ON_SUCCESS, done[0]),
            on_complete: callback(on_complete, ON_COMPLETE, done[1]),
            created: state.spec.created,
            finished: state.finished,
        })
    }
}
