//! A schedule entry: a name, a cron schedule, the message each tick emits, and its priority.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::CronSchedule;
use crate::{DEFAULT_PRIORITY, Error, Job, Message, Priority};

/// What a [`Scheduler`](crate::Scheduler) does about ticks that passed while no scheduler ran
/// (it was down, or just started).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CatchUp {
    /// Nothing: only ticks from now on.
    None,
    /// The last tick that passed, if it was not emitted yet. The default.
    #[default]
    Last,
    /// Every tick that passed within this long, each unless it was emitted already.
    AllWithin(Duration),
}

/// A named entry of a [`Scheduler`](crate::Scheduler): on each tick of its schedule, one
/// message of its type and payload goes to its priority.
///
/// ```
/// use hermes_core::cron::CronSchedule;
/// use hermes_core::CronEntry;
///
/// let entry = CronEntry::new(
///     "nightly-export",
///     CronSchedule::new("0 3 * * *", "Europe/Bratislava")?,
///     "report.export",
/// )
/// .payload(&serde_json::json!({"report": "sales"}))?;
/// assert_eq!(entry.name(), "nightly-export");
/// # Ok::<(), hermes_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct CronEntry {
    name: String,
    schedule: CronSchedule,
    message_type: String,
    payload: Option<Value>,
    priority: Priority,
}

/// The longest entry name, in bytes.
const MAX_NAME_LEN: usize = 100;

impl CronEntry {
    /// An entry called `name` emitting a message of `message_type` without payload, at the
    /// default priority. A name is letters, digits, `-`, `_` and `.`; an entry added under a
    /// name another entry has replaces it.
    pub fn new(
        name: impl Into<String>,
        schedule: CronSchedule,
        message_type: impl Into<String>,
    ) -> Self {
        CronEntry {
            name: name.into(),
            schedule,
            message_type: message_type.into(),
            payload: None,
            priority: DEFAULT_PRIORITY,
        }
    }

    /// An entry emitting `job` (its type, its fields as the payload, its priority).
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] when the job does not serialize to an object or array.
    pub fn job<J: Job>(
        name: impl Into<String>,
        schedule: CronSchedule,
        job: &J,
    ) -> Result<Self, Error> {
        CronEntry::new(name, schedule, J::TYPE)
            .payload(job)
            .map(|entry| entry.priority(J::PRIORITY))
    }

    /// The same with `payload`.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] when `payload` does not serialize to a JSON object or array.
    pub fn payload<T: Serialize + ?Sized>(mut self, payload: &T) -> Result<Self, Error> {
        let value = serde_json::to_value(payload)
            .map_err(|e| Error::InvalidMessage(format!("the payload cannot be encoded: {e}")))?;
        if !(value.is_object() || value.is_array()) {
            return Err(Error::InvalidMessage(
                "a payload is a JSON object or array".into(),
            ));
        }
        self.payload = Some(value);
        Ok(self)
    }

    /// The same at `priority`.
    #[must_use]
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// The entry's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its schedule.
    pub fn schedule(&self) -> &CronSchedule {
        &self.schedule
    }

    /// The type of the messages it emits.
    pub fn message_type(&self) -> &str {
        &self.message_type
    }

    /// The payload they carry, if any.
    pub fn payload_of_messages(&self) -> Option<&Value> {
        self.payload.as_ref()
    }

    /// The priority they go to.
    pub fn priority_of_messages(&self) -> Priority {
        self.priority
    }

    /// Checks the name.
    ///
    /// # Errors
    /// [`Error::InvalidSchedule`] for an empty or long name, or one with other characters.
    pub fn check(&self) -> Result<(), Error> {
        let fine = !self.name.is_empty()
            && self.name.len() <= MAX_NAME_LEN
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if fine {
            Ok(())
        } else {
            Err(Error::InvalidSchedule(format!(
                "the entry name {:?} is not 1 to {MAX_NAME_LEN} letters, digits, '-', '_' or '.'",
                crate::error::excerpt(&self.name)
            )))
        }
    }

    /// The message of the tick at `tick` (seconds since the epoch): its id comes from the
    /// entry's name and the tick, so every scheduler makes the same one.
    pub(crate) fn message_at(&self, tick: f64) -> Result<Message, Error> {
        let mut builder = Message::builder(&self.message_type).id(tick_id(&self.name, tick));
        if let Some(payload) = &self.payload {
            builder = builder.payload(payload);
        }
        builder.build()
    }
}

/// The id of the message of entry `name`'s tick at `tick`: `cron-<name>-<tick>`.
pub(crate) fn tick_id(name: &str, tick: f64) -> String {
    format!("cron-{name}-{}", tick as i64)
}
