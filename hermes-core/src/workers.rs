//! Live workers: what a running [`Dispatcher`](crate::Dispatcher) announces about itself in the
//! backend, so that `hermes workers` and dashboards can list who is working on what.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::Priority;

/// A running dispatcher, as it announces itself: where it runs, since when, how busy it is and
/// the messages it handles now. Announced again every third of its time to live, so it
/// disappears within that time of stopping or being killed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WorkerInfo {
    /// Unique per `handle` call: `<host>-<pid>-<random>`.
    pub id: String,
    /// The host name.
    pub host: String,
    /// The process id.
    pub pid: u32,
    /// When it started, as Unix seconds.
    pub started: f64,
    /// How many messages it may handle at once.
    pub concurrency: usize,
    /// How many it handles now.
    pub busy: usize,
    /// The priorities it takes from (empty: all).
    pub priorities: Vec<Priority>,
    /// The version of `hermes-core` it runs.
    pub version: String,
    /// The messages it handles now.
    pub running: Vec<RunningMessage>,
    /// How many messages it finished handling since it started, failed ones included.
    #[serde(default)]
    pub handled: u64,
    /// How many of those failed (a handler failed, panicked or ran out of time).
    #[serde(default)]
    pub failed: u64,
    /// When this announcement was made, as Unix seconds.
    #[serde(default)]
    pub announced: f64,
    /// The cron entries of the schedulers it runs
    /// ([`Dispatcher::with_scheduler`](crate::Dispatcher::with_scheduler)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<ScheduledEntry>,
    /// The limits of the job types it handles ([`Job::limits`](crate::Job::limits),
    /// [`Dispatcher::limit`](crate::Dispatcher::limit)), by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<TypeLimits>,
    /// Until when the announcement holds, as Unix seconds; past it the worker is gone.
    pub expires: f64,
}

/// A message a worker handles now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunningMessage {
    /// The message id.
    pub id: String,
    /// The message type.
    #[serde(rename = "type")]
    pub message_type: String,
    /// Since when, as Unix seconds.
    pub since: f64,
}

impl RunningMessage {
    /// A message `id` of `message_type`, handled since `since` (Unix seconds).
    pub fn new(id: impl Into<String>, message_type: impl Into<String>, since: f64) -> Self {
        RunningMessage {
            id: id.into(),
            message_type: message_type.into(),
            since,
        }
    }
}

/// The limits of one job type, as a worker announces them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TypeLimits {
    /// The job type.
    #[serde(rename = "type")]
    pub message_type: String,
    /// Its limits.
    #[serde(flatten)]
    pub limits: crate::flow::Limits,
}

impl TypeLimits {
    /// The limits of `message_type`.
    pub fn new(message_type: impl Into<String>, limits: crate::flow::Limits) -> Self {
        TypeLimits {
            message_type: message_type.into(),
            limits,
        }
    }
}

/// A cron entry as a worker announces it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ScheduledEntry {
    /// The entry's name.
    pub name: String,
    /// Its cron expression.
    pub expression: String,
    /// Its time zone.
    pub zone: String,
    /// The type of the messages it emits.
    #[serde(rename = "type")]
    pub message_type: String,
    /// Their priority.
    pub priority: Priority,
    /// Its next tick, as Unix seconds.
    pub next: Option<f64>,
    /// The last tick this worker's scheduler emitted or found emitted, as Unix seconds.
    pub previous: Option<f64>,
    /// The payload of the messages it emits, so that a dashboard can emit one now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<serde_json::Value>,
}

impl ScheduledEntry {
    /// A message of this entry's type and payload, as a tick would emit it, under an id of its
    /// own (`cron-<name>-now-<unix ms>`): what "run now" emits, to [`priority`](Self::priority).
    ///
    /// # Errors
    /// [`Error::InvalidMessage`](crate::Error::InvalidMessage) when the announced type or
    /// payload make no message.
    pub fn message_now(&self) -> Result<crate::Message, crate::Error> {
        let now_ms = (crate::time::unix_now() * 1000.0) as i64;
        let mut builder = crate::Message::builder(&self.message_type)
            .id(format!("cron-{}-now-{now_ms}", self.name));
        if let Some(payload) = &self.payload {
            builder = builder.payload(payload);
        }
        builder.build()
    }
}

impl From<&crate::cron::CronStatus> for ScheduledEntry {
    fn from(status: &crate::cron::CronStatus) -> Self {
        let entry = &status.entry;
        ScheduledEntry {
            name: entry.name().to_owned(),
            expression: entry.schedule().expression().to_owned(),
            zone: entry.schedule().zone().to_owned(),
            message_type: entry.message_type().to_owned(),
            priority: entry.priority_of_messages(),
            next: status.next,
            previous: status.previous,
            payload: entry.payload_of_messages().cloned(),
        }
    }
}

impl WorkerInfo {
    /// A worker of this process that started now, with `concurrency` and `priorities`,
    /// announced for `ttl`.
    pub fn new(concurrency: usize, priorities: &[Priority], ttl: Duration) -> Self {
        let host = host_name();
        let pid = std::process::id();
        let now = crate::time::unix_now();
        WorkerInfo {
            id: format!("{host}-{pid}-{:08x}", rand::random::<u32>()),
            host,
            pid,
            started: now,
            concurrency,
            busy: 0,
            priorities: priorities.to_vec(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            running: Vec::new(),
            handled: 0,
            failed: 0,
            announced: now,
            schedules: Vec::new(),
            limits: Vec::new(),
            expires: now + ttl.as_secs_f64(),
        }
    }

    /// The worker as JSON, as the drivers store it.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A worker from [`to_json`](WorkerInfo::to_json)'s form; `None` for anything else.
    pub fn from_json(json: &[u8]) -> Option<Self> {
        serde_json::from_slice(json).ok()
    }

    /// The same announcement, made now and holding until `ttl` from now: what a driver stores
    /// on [`Workers::announce`](crate::driver::Workers::announce).
    #[must_use]
    pub fn expiring_in(&self, ttl: Duration) -> Self {
        let now = crate::time::unix_now();
        WorkerInfo {
            announced: now,
            expires: now + ttl.as_secs_f64(),
            ..self.clone()
        }
    }

    /// Whether the announcement still holds at `now` (Unix seconds).
    pub fn is_alive_at(&self, now: f64) -> bool {
        self.expires > now
    }
}

/// This machine's name: `HOSTNAME`, or the kernel's, or `localhost`.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_travels_as_json_and_expires() {
        let mut worker = WorkerInfo::new(4, &[200, 100], Duration::from_secs(30));
        worker
            .running
            .push(RunningMessage::new("m-1", "report.export", 1.5));
        worker.limits.push(TypeLimits::new(
            "call-api",
            crate::flow::Limits::new()
                .concurrency(5)
                .rate_per_key(crate::flow::Rate::per_minute(50)),
        ));
        let json: serde_json::Value = serde_json::from_slice(&worker.to_json()).unwrap();
        assert_eq!(
            json["limits"],
            serde_json::json!([{
                "type": "call-api",
                "concurrency": 5,
                "rate_per_key": { "max": 50, "period_ms": 60_000 }
            }])
        );
        let back = WorkerInfo::from_json(&worker.to_json()).unwrap();
        assert_eq!(back, worker);
        assert!(back.id.starts_with(&format!("{}-{}-", back.host, back.pid)));
        assert!(back.is_alive_at(crate::time::unix_now()));
        assert!(!back.is_alive_at(back.expires + 1.0));
        assert_eq!(WorkerInfo::from_json(b"{}"), None);
    }

    #[test]
    fn an_announcement_without_counts_reads_as_zero() {
        let mut json: serde_json::Value =
            serde_json::from_slice(&WorkerInfo::new(1, &[], Duration::from_secs(3)).to_json())
                .unwrap();
        for key in ["handled", "failed", "announced"] {
            json.as_object_mut().unwrap().remove(key);
        }
        let back = WorkerInfo::from_json(json.to_string().as_bytes()).unwrap();
        assert_eq!((back.handled, back.failed, back.announced), (0, 0, 0.0));
    }
}
