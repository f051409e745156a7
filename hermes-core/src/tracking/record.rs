//! What a backend keeps of one job by its id: its state, its result and its progress.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Priority;

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum JobState {
    /// Queued, due now, not started.
    Waiting,
    /// Queued, due later.
    Delayed,
    /// A worker is running it ([`JobRecord::worker`], since [`JobRecord::started`]).
    Running,
    /// It failed and runs again at [`JobRecord::next_attempt`].
    Retrying,
    /// It succeeded; its [`result`](JobRecord::result) is kept.
    Succeeded,
    /// It failed for good (its retries ran out, or it cannot succeed) and was not retried.
    Dead,
    /// It was cancelled, before it started or while it ran.
    Cancelled,
}

impl JobState {
    /// Whether the job is done for good: succeeded, dead or cancelled.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Dead | JobState::Cancelled
        )
    }

    /// The state's name: `waiting`, `delayed`, `running`, `retrying`, `succeeded`, `dead` or
    /// `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Waiting => "waiting",
            JobState::Delayed => "delayed",
            JobState::Running => "running",
            JobState::Retrying => "retrying",
            JobState::Succeeded => "succeeded",
            JobState::Dead => "dead",
            JobState::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How far a running job says it is ([`JobContext::progress`](crate::JobContext::progress)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Progress {
    /// From 0 to 100.
    pub percent: u8,
    /// What the handler said it is doing, if anything (at most [`MAX_NOTE_LEN`] bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// When it said so, in Unix seconds.
    pub at: f64,
}

/// The longest progress note kept, in bytes; a longer one is cut.
pub const MAX_NOTE_LEN: usize = 1024;

/// What is known of one job, by id: kept by a backend with a
/// [`JobStore`](crate::driver::JobStore) for the dispatcher's retention window
/// ([`Dispatcher::keep_outcomes`](crate::Dispatcher::keep_outcomes)).
///
/// Its `Debug` output shows the result's size, not the result (results, like payloads, may
/// carry personal data).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct JobRecord {
    /// The message id.
    pub id: String,
    /// The message type.
    #[serde(rename = "type")]
    pub message_type: String,
    /// Where it stands.
    pub state: JobState,
    /// The priority of its queue.
    pub priority: Priority,
    /// How many times it was retried.
    pub retries: u32,
    /// When the state was set, in Unix seconds.
    pub updated: f64,
    /// The worker running it, or that ran it last ([`WorkerInfo::id`](crate::workers::WorkerInfo::id)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// When its last run began, in Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<f64>,
    /// When it was done for good, in Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<f64>,
    /// When it runs again ([`JobState::Retrying`] and [`JobState::Delayed`]), in Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt: Option<f64>,
    /// Why its last run failed, as its handler said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What its handler returned ([`JobState::Succeeded`] only); `None` for a handler that
    /// returns nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// What it last said of its progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// The batch or workflow it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

impl JobRecord {
    /// A record of the message `id` of `message_type` on `priority`, in `state`, now.
    pub fn new(
        id: impl Into<String>,
        message_type: impl Into<String>,
        priority: Priority,
        state: JobState,
    ) -> Self {
        JobRecord {
            id: id.into(),
            message_type: message_type.into(),
            state,
            priority,
            retries: 0,
            updated: crate::time::unix_now(),
            worker: None,
            started: None,
            finished: None,
            next_attempt: None,
            error: None,
            result: None,
            progress: None,
            group: None,
        }
    }

    /// The record as a backend stores it: JSON.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`](crate::Error::InvalidMessage) when the result cannot be
    /// written as JSON (a map with keys that are not strings).
    pub fn encode(&self) -> Result<String, crate::Error> {
        serde_json::to_string(self).map_err(|e| {
            crate::Error::InvalidMessage(format!("a job record cannot be encoded: {e}"))
        })
    }

    /// A record a backend stored, or `None` when `stored` is not one (written by another
    /// program, or cut).
    pub fn decode(stored: &[u8]) -> Option<Self> {
        serde_json::from_slice(stored).ok()
    }

    /// The result as a `T`.
    ///
    /// # Errors
    /// [`Error::InvalidResult`](crate::Error::InvalidResult) naming the path in the result
    /// where it does not fit `T` (never its values).
    pub fn result_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, crate::Error> {
        let value = self.result.as_ref().unwrap_or(&Value::Null);
        crate::message::from_value(value).map_err(|reason| {
            crate::Error::InvalidResult(format!(
                "the result of job #{} is not a {}: {reason}",
                self.id,
                std::any::type_name::<T>()
            ))
        })
    }
}

impl fmt::Debug for JobRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let result = self
            .result
            .as_ref()
            .map(|value| format!("<{} bytes>", value.to_string().len()));
        f.debug_struct("JobRecord")
            .field("id", &self.id)
            .field("message_type", &self.message_type)
            .field("state", &self.state)
            .field("priority", &self.priority)
            .field("retries", &self.retries)
            .field("updated", &self.updated)
            .field("worker", &self.worker)
            .field("started", &self.started)
            .field("finished", &self.finished)
            .field("next_attempt", &self.next_attempt)
            .field("error", &self.error)
            .field("result", &result)
            .field("progress", &self.progress)
            .field("group", &self.group)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_what_they_write_and_hide_results_in_debug() {
        let mut record = JobRecord::new("a1", "export", 100, JobState::Succeeded);
        record.result = Some(serde_json::json!({"secret": "s3cr3t"}));
        let stored = record.encode().unwrap();
        assert_eq!(JobRecord::decode(stored.as_bytes()), Some(record.clone()));
        assert!(!format!("{record:?}").contains("s3cr3t"));
        assert_eq!(JobRecord::decode(b"{\"id\":1}"), None);
    }

    #[test]
    fn a_result_of_the_wrong_shape_names_the_path_not_the_value() {
        let mut record = JobRecord::new("a1", "export", 100, JobState::Succeeded);
        record.result = Some(serde_json::json!({"rows": "s3cr3t"}));
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Out {
            rows: u32,
        }
        let error = record.result_as::<Out>().unwrap_err().to_string();
        assert!(error.contains("rows"), "{error}");
        assert!(!error.contains("s3cr3t"), "{error}");
    }
}
