//! The emitter's side of results, batches and workflows: reading what became of jobs, opening
//! batches and workflows.

use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;

use crate::bookkeeping::{advance, settle_member};
use crate::driver::JobStore;
use crate::tracking::{
    Batch, BatchStatus, GroupKind, JobRecord, JobState, ON_COMPLETE, ON_SUCCESS, Settled, Workflow,
    WorkflowStatus, member_id, opener_id,
};
use crate::{Emitter, Error, Job, Message, Priority};

/// How long a group's state is kept once it is finished, unless the emitter says otherwise:
/// a day.
const GROUP_KEPT: Duration = Duration::from_secs(24 * 3600);

/// How often [`Emitter::wait_for`] reads the job's record.
const WAIT_POLL: Duration = Duration::from_millis(50);

impl Emitter {
    fn jobs(&self) -> Result<&dyn JobStore, Error> {
        self.driver().jobs().ok_or(Error::Unsupported {
            driver: self.driver().name(),
            what: "results, job status, batches and workflows (the jobs facet)",
        })
    }

    /// What is known of the job `id`: where it stands, its result, its progress; `None` when
    /// the backend keeps nothing of it (a job not run yet that was emitted untracked, or whose
    /// record expired).
    ///
    /// # Errors
    /// [`Error::Unsupported`] on a driver without the [`jobs`](crate::Driver::jobs) facet;
    /// connection errors.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    pub async fn status(&self, id: &str) -> Result<Option<JobRecord>, Error> {
        self.jobs()?.get(id).await
    }

    /// The result of the job `id` as a `T`, once it succeeded; `None` before (or when nothing
    /// is kept of it).
    ///
    /// # Errors
    /// [`Error::InvalidResult`] when the result does not fit `T` (naming the path, not the
    /// value); otherwise as [`status`](Self::status).
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    pub async fn result<T: DeserializeOwned>(&self, id: &str) -> Result<Option<T>, Error> {
        match self.status(id).await? {
            Some(record) if record.state == JobState::Succeeded => record.result_as().map(Some),
            _ => Ok(None),
        }
    }

    /// Waits up to `timeout` for the job `id` to succeed, and returns its result as a `T`.
    ///
    /// # Errors
    /// [`Error::InvalidResult`] when the job is dead or cancelled (with its error), when it
    /// is not done within `timeout`, or when its result does not fit `T`; otherwise as
    /// [`status`](Self::status).
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    pub async fn wait_for<T: DeserializeOwned>(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<T, Error> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(record) = self.status(id).await? {
                match record.state {
                    JobState::Succeeded => return record.result_as(),
                    JobState::Dead | JobState::Cancelled => {
                        return Err(Error::InvalidResult(format!(
                            "job #{id} is {}: {}",
                            record.state,
                            record.error.as_deref().unwrap_or("no error given")
                        )));
                    }
                    _ => {}
                }
            }
            if Instant::now() >= until {
                return Err(Error::InvalidResult(format!(
                    "job #{id} did not succeed within {timeout:?}"
                )));
            }
            tokio::time::sleep(WAIT_POLL).await;
        }
    }

    /// Sends `message` as [`emit`](Self::emit) does, after recording it as waiting (or
    /// delayed), so that [`status`](Self::status) knows it before a worker takes it; its
    /// worker then records every state it reaches. (A job emitted otherwise leaves a record
    /// only once it runs 50 ms, reports progress, fails, returns a result or belongs to a
    /// batch or workflow.)
    ///
    /// # Errors
    /// As [`status`](Self::status), then as [`emit`](Self::emit) (the record is removed
    /// again, as far as the backend lets it).
    ///
    /// # Cancellation safety
    /// Dropping the future may leave a record of a message never sent; it expires.
    pub async fn emit_tracked(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        let store = self.jobs()?;
        let state = if message.is_due_at(crate::time::unix_now()) {
            JobState::Waiting
        } else {
            JobState::Delayed
        };
        let mut record = JobRecord::new(message.id(), message.message_type(), priority, state);
        record.retries = message.retries();
        record.next_attempt = message.execute_at().filter(|_| state == JobState::Delayed);
        record.group = message.group().map(str::to_owned);
        store.put(&record, GROUP_KEPT).await?;
        let message = message.clone().with_tracked(true);
        self.emit(&message, priority).await
    }

    /// Opens `batch`, sends `jobs` as its members, and closes it: its callbacks are sent once
    /// every job is done. Returns the batch's id. With no jobs, the batch is done at once.
    ///
    /// # Errors
    /// [`Error::Unsupported`] on a driver without the [`jobs`](crate::Driver::jobs) facet;
    /// [`Error::Group`] for a parent batch that is finished; as [`OpenBatch::add`].
    ///
    /// # Cancellation safety
    /// Dropping the future may leave the batch open with some of the jobs: it is then never
    /// done, and expires.
    pub async fn emit_batch_of<J: Job>(&self, batch: Batch, jobs: &[J]) -> Result<String, Error> {
        let open = self.open_batch(batch).await?;
        open.add(jobs).await?;
        open.close().await?;
        Ok(open.id)
    }

    /// Opens `batch` to add jobs to it as they come; it is not done before
    /// [`OpenBatch::close`], however quickly its jobs run.
    ///
    /// # Errors
    /// As [`emit_batch_of`](Self::emit_batch_of).
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have opened the batch.
    pub async fn open_batch(&self, batch: Batch) -> Result<OpenBatch<'_>, Error> {
        let spec = batch.spec()?;
        let store = self.jobs()?;
        if let Some(parent) = &spec.parent {
            store.join(parent, std::slice::from_ref(&spec.id)).await?;
        }
        store
            .open(&spec, &[opener_id(&spec.id)], GROUP_KEPT)
            .await?;
        Ok(OpenBatch {
            emitter: self,
            id: spec.id,
        })
    }

    /// Adds `jobs` to the batch `batch`, which must not be finished: from a job of the batch
    /// (the batch is not done while that job runs), or while it is open.
    ///
    /// # Errors
    /// As [`OpenBatch::add`].
    ///
    /// # Cancellation safety
    /// As [`OpenBatch::add`].
    pub async fn add_to_batch<J: Job>(
        &self,
        batch: &str,
        jobs: &[J],
    ) -> Result<Vec<String>, Error> {
        OpenBatch {
            emitter: self,
            id: batch.to_owned(),
        }
        .add(jobs)
        .await
    }

    /// The batch `id` now; `None` when it is not kept (never opened, or expired).
    ///
    /// # Errors
    /// As [`status`](Self::status).
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    pub async fn batch_status(&self, id: &str) -> Result<Option<BatchStatus>, Error> {
        let store = self.jobs()?;
        let Some(state) = store.group(id).await? else {
            return Ok(None);
        };
        let opener = store.outcomes(id, &[opener_id(id)]).await?;
        let open = opener.first().is_none_or(Option::is_none);
        let mut done = [false; 2];
        for (slot, name) in done.iter_mut().zip([ON_SUCCESS, ON_COMPLETE]) {
            if state.released.iter().any(|n| n == name) {
                *slot = store
                    .get(&member_id(id, name))
                    .await?
                    .is_some_and(|record| record.state.is_final());
            }
        }
        Ok(BatchStatus::from_state(&state, open, done))
    }

    /// Opens `workflow` and sends its first steps; each later step is sent once the steps it
    /// waits for succeeded. Returns the workflow's id.
    ///
    /// # Errors
    /// [`Error::Group`] for a workflow without steps; as [`emit_batch_of`](Self::emit_batch_of).
    ///
    /// # Cancellation safety
    /// Dropping the future may leave the workflow opened without its first steps sent.
    pub async fn emit_workflow(&self, workflow: &Workflow) -> Result<String, Error> {
        let spec = workflow.spec()?;
        let store = self.jobs()?;
        let members: Vec<String> = match &spec.kind {
            GroupKind::Workflow { steps } => {
                steps.iter().map(|s| member_id(&spec.id, &s.name)).collect()
            }
            GroupKind::Batch { .. } => Vec::new(),
        };
        if let Some(parent) = &spec.parent {
            store.join(parent, std::slice::from_ref(&spec.id)).await?;
        }
        store.open(&spec, &members, GROUP_KEPT).await?;
        advance(store, &spec.id).await?;
        Ok(spec.id)
    }

    /// The workflow `id` now; `None` when it is not kept.
    ///
    /// # Errors
    /// As [`status`](Self::status).
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    pub async fn workflow_status(&self, id: &str) -> Result<Option<WorkflowStatus>, Error> {
        let store = self.jobs()?;
        let Some(state) = store.group(id).await? else {
            return Ok(None);
        };
        let names: Vec<String> = match &state.spec.kind {
            GroupKind::Workflow { steps } => steps.iter().map(|s| member_id(id, &s.name)).collect(),
            GroupKind::Batch { .. } => return Ok(None),
        };
        let outcomes = store.outcomes(id, &names).await?;
        Ok(WorkflowStatus::from_state(&state, outcomes))
    }
}

/// A batch taking jobs ([`Emitter::open_batch`]) until [`close`](Self::close).
#[derive(Debug)]
#[must_use = "an open batch is never done until it is closed"]
pub struct OpenBatch<'a> {
    emitter: &'a Emitter,
    id: String,
}

impl OpenBatch<'_> {
    /// The batch's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Sends `jobs` as members of the batch; returns their ids.
    ///
    /// # Errors
    /// [`Error::Group`] when the batch is finished or unknown; [`Error::InvalidMessage`] for
    /// a job that does not serialize (nothing is sent then); the driver's error from sending
    /// (the jobs not sent then count as failed, so the batch can still finish).
    ///
    /// # Cancellation safety
    /// Dropping the future may leave jobs counted in the batch but never sent: the batch is
    /// then never done, and expires.
    pub async fn add<J: Job>(&self, jobs: &[J]) -> Result<Vec<String>, Error> {
        let messages = jobs
            .iter()
            .map(|job| Ok(Message::from_job(job)?.with_group(Some(self.id.clone()))))
            .collect::<Result<Vec<_>, Error>>()?;
        self.add_messages(&messages, J::PRIORITY).await?;
        Ok(messages.iter().map(|m| m.id().to_owned()).collect())
    }

    /// Sends `messages` on `priority` as members of the batch (their own group, if any, is
    /// replaced).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    ///
    /// # Cancellation safety
    /// As [`add`](Self::add).
    pub async fn add_messages(
        &self,
        messages: &[Message],
        priority: Priority,
    ) -> Result<(), Error> {
        if messages.is_empty() {
            return Ok(());
        }
        let store = self.emitter.jobs()?;
        let messages: Vec<Message> = messages
            .iter()
            .map(|m| m.clone().with_group(Some(self.id.clone())))
            .collect();
        let ids: Vec<String> = messages.iter().map(|m| m.id().to_owned()).collect();
        store.join(&self.id, &ids).await?;
        if let Err(e) = self.emitter.emit_batch(&messages, priority).await {
            let outcome = Settled::Failed {
                reason: format!("it could not be sent: {e}"),
            };
            for id in &ids {
                if let Err(e) = settle_member(store, &self.id, id, &outcome, None).await {
                    tracing::warn!(
                        "Settling unsent job #{id} of batch {} failed - {e}",
                        self.id
                    );
                }
            }
            return Err(e);
        }
        Ok(())
    }

    /// Closes the batch: no more jobs from outside (its own jobs may still add some). It is
    /// done, and its callbacks are sent, once every job is done; at once when all are.
    ///
    /// # Errors
    /// As [`Emitter::status`].
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have closed it; closing again is harmless.
    pub async fn close(&self) -> Result<(), Error> {
        let store = self.emitter.jobs()?;
        let outcome = Settled::Succeeded { result: None };
        settle_member(store, &self.id, &opener_id(&self.id), &outcome, None).await
    }
}
