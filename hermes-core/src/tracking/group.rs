//! What a backend keeps of a batch or a workflow: a group of members, each settled once, and
//! the messages the group releases once.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Error, Message, Priority};

/// A message a group sends later (a batch's callback, a workflow's step): its type, payload,
/// priority and limit key, kept in the group's [`GroupSpec`] until it is released.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Planned {
    /// The message type.
    #[serde(rename = "type")]
    pub message_type: String,
    /// The payload; for a step after others, `None` (it takes their results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// The priority of the queue it goes to.
    pub priority: Priority,
    /// Its [limit key](Message::limit_key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_key: Option<String>,
}

impl Planned {
    /// What `message` would send on `priority`, its id and times left out.
    pub fn of(message: &Message, priority: Priority) -> Self {
        Planned {
            message_type: message.message_type().to_owned(),
            payload: message.payload().cloned(),
            priority,
            limit_key: message.limit_key().map(str::to_owned),
        }
    }

    /// The message to release: id `id`, member of `group`, created now, with `payload` when
    /// given (a step's input) or the planned one.
    ///
    /// # Errors
    /// [`Error::InvalidResult`] when `payload` is neither a JSON object nor an array.
    pub fn message(
        &self,
        id: String,
        group: &str,
        payload: Option<Value>,
    ) -> Result<Message, Error> {
        let payload = match payload {
            Some(value) if value.is_object() || value.is_array() => Some(value),
            Some(Value::Null) | None => self.payload.clone(),
            Some(_) => {
                return Err(Error::InvalidResult(format!(
                    "the input of {id} is not a JSON object or array, so it cannot be a payload"
                )));
            }
        };
        let message = Message::new(self.message_type.clone())
            .with_id(id)
            .with_payload(payload)
            .with_limit_key(self.limit_key.clone())
            .with_group(Some(group.to_owned()));
        Ok(message)
    }
}

impl fmt::Debug for Planned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Planned")
            .field("message_type", &self.message_type)
            .field("payload", &self.payload.as_ref().map(|_| "<payload>"))
            .field("priority", &self.priority)
            .field("limit_key", &self.limit_key)
            .finish()
    }
}

/// One step of a workflow: its name, its message, and the steps it starts after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StepSpec {
    /// The step's name, unique in its workflow.
    pub name: String,
    /// Its message; a step after others takes their results as its payload.
    pub planned: Planned,
    /// The steps it starts after, once each succeeded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
}

/// What a group is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum GroupKind {
    /// A batch: its members are jobs (and nested groups), and its callbacks run once every
    /// member is done.
    Batch {
        /// Sent when every member succeeded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on_success: Option<Box<Planned>>,
        /// Sent when every member is done, whatever became of them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on_complete: Option<Box<Planned>>,
    },
    /// A workflow: its members are its steps, each sent once the steps it starts after
    /// succeeded.
    Workflow {
        /// The steps, in the order they were declared.
        steps: Vec<StepSpec>,
    },
}

/// A group as it is created: its id, what it is, and the group it belongs to. A backend
/// keeps it as the JSON of [`encode`](Self::encode) and gives it back as it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GroupSpec {
    /// The group's id.
    pub id: String,
    /// A batch or a workflow.
    #[serde(flatten)]
    pub kind: GroupKind,
    /// The group this one is a member of (a batch in a batch), settled there when this one
    /// is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// What the application calls it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// When it was created, in Unix seconds.
    pub created: f64,
}

impl GroupSpec {
    /// The spec as a backend stores it.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] when a payload cannot be written as JSON.
    pub fn encode(&self) -> Result<String, Error> {
        serde_json::to_string(self)
            .map_err(|e| Error::InvalidMessage(format!("a group cannot be encoded: {e}")))
    }

    /// A spec a backend stored, or `None` when `stored` is not one.
    pub fn decode(stored: &[u8]) -> Option<Self> {
        serde_json::from_slice(stored).ok()
    }
}

/// How a member of a group ended: what a backend keeps of it, as the JSON of
/// [`encode`](Self::encode).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Settled {
    /// It succeeded, with this result (kept for a workflow's later steps).
    Succeeded {
        /// What its handler returned.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
    },
    /// It failed for good, was cancelled, or never ran because a step before it failed.
    Failed {
        /// Why, in a few words.
        reason: String,
    },
}

impl Settled {
    /// Whether it succeeded.
    pub fn succeeded(&self) -> bool {
        matches!(self, Settled::Succeeded { .. })
    }

    /// The outcome as a backend stores it.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] when the result cannot be written as JSON.
    pub fn encode(&self) -> Result<String, Error> {
        serde_json::to_string(self)
            .map_err(|e| Error::InvalidMessage(format!("an outcome cannot be encoded: {e}")))
    }

    /// An outcome a backend stored, or `None` when `stored` is not one.
    pub fn decode(stored: &[u8]) -> Option<Self> {
        serde_json::from_slice(stored).ok()
    }
}

impl fmt::Debug for Settled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Settled::Succeeded { result } => f
                .debug_struct("Succeeded")
                .field("result", &result.as_ref().map(|_| "<result>"))
                .finish(),
            Settled::Failed { reason } => f.debug_struct("Failed").field("reason", reason).finish(),
        }
    }
}

/// A group's counts: members added, and how many of them succeeded and failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tally {
    /// Members added.
    pub total: u64,
    /// Members that succeeded.
    pub succeeded: u64,
    /// Members that failed.
    pub failed: u64,
}

impl Tally {
    /// A tally of `total` members, `succeeded` and `failed` of them settled.
    pub fn new(total: u64, succeeded: u64, failed: u64) -> Self {
        Tally {
            total,
            succeeded,
            failed,
        }
    }

    /// Members not settled yet.
    pub fn pending(&self) -> u64 {
        self.total.saturating_sub(self.succeeded + self.failed)
    }
}

/// A group as a backend holds it now.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GroupState {
    /// What it is.
    pub spec: GroupSpec,
    /// Its counts.
    pub tally: Tally,
    /// The names of what it released ([`JobStore::release`](crate::driver::JobStore::release)),
    /// sorted.
    pub released: Vec<String>,
    /// When its last member was settled, in Unix seconds; `None` while some are pending.
    pub finished: Option<f64>,
}

impl GroupState {
    /// A group in this state.
    ///
    /// Marks a backend keeps for its own bookkeeping among `released` (starting with
    /// [`INTERNAL_MARK`](crate::driver::INTERNAL_MARK)) are left out.
    pub fn new(
        spec: GroupSpec,
        tally: Tally,
        mut released: Vec<String>,
        finished: Option<f64>,
    ) -> Self {
        released.retain(|name| !name.starts_with(crate::driver::INTERNAL_MARK));
        released.sort();
        GroupState {
            spec,
            tally,
            released,
            finished,
        }
    }
}
