//! The record of one running job, as a worker keeps it up to date.

use std::sync::Arc;
use std::time::Duration;

use super::Gatherer;
use crate::time::unix_now;
use crate::tracking::{
    JobRecord, JobState, MAX_NOTE_LEN, Progress, Settled, is_callback, is_released,
};
use crate::{Driver, Error, Message, Priority};

/// How long a job runs before the worker records it as running: a job done sooner goes from
/// waiting to done without a write in between.
pub(crate) const RUNNING_AFTER: Duration = Duration::from_millis(50);

/// The record of one run, written to the driver's [`JobStore`](crate::driver::JobStore): once
/// the run has gone on a moment, at each progress report, and when it ends. Writes go one at a
/// time, and none after the last.
pub(crate) struct Tracker {
    driver: Arc<dyn Driver>,
    /// How long records are kept; `None` writes none (a member of a group is still settled).
    keep: Option<Duration>,
    state: tokio::sync::Mutex<Tracked>,
    /// The write of the running state, when it was started.
    running: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Gathers the settles of the dispatcher's runs.
    gatherer: Arc<Gatherer>,
}

struct Tracked {
    record: JobRecord,
    /// The run's end is recorded: nothing more is written.
    ended: bool,
    /// Something of this job is in the store (emitted tracked, or a write of this run).
    stored: bool,
}

/// How a run ended, for its record.
#[derive(Clone)]
pub(crate) struct Ended {
    pub(crate) state: JobState,
    pub(crate) error: Option<String>,
    pub(crate) result: Option<serde_json::Value>,
    pub(crate) next_attempt: Option<f64>,
}

impl Tracker {
    /// The tracker of `message` run by `worker` on `priority`, when the driver keeps records
    /// and either `keep` is set (how long records are kept) or the message is a member of a
    /// group.
    pub(crate) fn new(
        driver: &Arc<dyn Driver>,
        message: &Message,
        priority: Priority,
        worker: &str,
        keep: Option<Duration>,
        gatherer: &Arc<Gatherer>,
    ) -> Option<Arc<Tracker>> {
        driver.jobs()?;
        if keep.is_none() && message.group().is_none() {
            return None;
        }
        let mut record = JobRecord::new(
            message.id(),
            message.message_type(),
            priority,
            JobState::Running,
        );
        record.retries = message.retries();
        record.worker = Some(worker.to_owned());
        record.started = Some(unix_now());
        record.group = message.group().map(str::to_owned);
        Some(Arc::new(Tracker {
            driver: driver.clone(),
            keep,
            state: tokio::sync::Mutex::new(Tracked {
                record,
                ended: false,
                stored: message.is_tracked(),
            }),
            running: std::sync::Mutex::new(None),
            gatherer: gatherer.clone(),
        }))
    }

    /// Records the run as running, in a task of its own that [`end`](Self::end) waits for,
    /// unless its end is recorded already. A failure is logged.
    pub(crate) fn mark_running(self: &Arc<Self>) {
        let tracker = self.clone();
        let task = tokio::spawn(async move {
            let mut state = tracker.state.lock().await;
            if !state.ended {
                state.stored = true;
                tracker.write(&state.record).await;
            }
        });
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
    }

    /// Records the handler's progress.
    pub(crate) async fn progress(&self, percent: u8, note: Option<&str>) -> Result<(), Error> {
        let mut state = self.state.lock().await;
        if state.ended {
            return Ok(());
        }
        let note = note.map(|note| {
            let mut end = note.len().min(MAX_NOTE_LEN);
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note[..end].to_owned()
        });
        state.record.progress = Some(Progress {
            percent: percent.min(100),
            note,
            at: unix_now(),
        });
        state.record.updated = unix_now();
        state.stored = true;
        match (self.driver.jobs(), self.keep) {
            (Some(store), Some(keep)) => store.put(&state.record, keep).await,
            _ => Ok(()),
        }
    }

    /// Records how the run ended and, for a member of a group done for good, settles it there
    /// and releases what that makes due. Nothing is written after.
    ///
    /// # Errors
    /// The store's, when settling failed (the delivery must then not be acknowledged, so it
    /// is settled when it comes back). A failure to write a record alone is logged.
    pub(crate) async fn end(&self, ended: Ended) -> Result<(), Error> {
        let running = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(task) = running {
            let _ = task.await;
        }
        let mut state = self.state.lock().await;
        state.ended = true;
        // A quick success with nothing to keep, of a job nobody asked to track, leaves no
        // record: the common case costs no write.
        let quick = ended.state == JobState::Succeeded && ended.result.is_none() && !state.stored;
        let unremarkable = quick && state.record.group.is_none();
        let now = unix_now();
        let record = &mut state.record;
        record.state = ended.state;
        record.updated = now;
        record.error = ended.error;
        record.result = ended.result;
        record.next_attempt = ended.next_attempt;
        record.finished = ended.state.is_final().then_some(now);
        if ended.state == JobState::Succeeded
            && let Some(progress) = &mut record.progress
        {
            progress.percent = 100;
        }
        let Some(store) = self.driver.jobs() else {
            return Ok(());
        };
        let member = record
            .group
            .clone()
            .filter(|group| ended.state.is_final() && !is_callback(group, &record.id));
        match member {
            Some(group) => {
                let outcome = settled_of(record);
                // A batch's job that succeeded quickly with nothing to keep: its outcome in the
                // batch is all there is to know.
                let batch_job = !is_released(&group, &record.id);
                let kept = self
                    .keep
                    .filter(|_| !(quick && batch_job))
                    .map(|keep| (&*record, keep));
                let gatherer = Some(&*self.gatherer);
                super::settle_member_with(store, gatherer, &group, &record.id, &outcome, kept).await
            }
            None => {
                if !unremarkable {
                    self.write(record).await;
                }
                Ok(())
            }
        }
    }

    async fn write(&self, record: &JobRecord) {
        if let (Some(store), Some(keep)) = (self.driver.jobs(), self.keep)
            && let Err(e) = store.put(record, keep).await
        {
            tracing::warn!(
                "Recording job #{} as {} failed - {e}",
                record.id,
                record.state
            );
        }
    }
}

/// What a record done for good counts as in its group.
pub(crate) fn settled_of(record: &JobRecord) -> Settled {
    match record.state {
        JobState::Succeeded => Settled::Succeeded {
            result: record.result.clone(),
        },
        state => Settled::Failed {
            reason: match &record.error {
                Some(error) => format!("{state}: {error}"),
                None => state.to_string(),
            },
        },
    }
}
