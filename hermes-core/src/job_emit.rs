//! Emitting typed jobs: one at a time with its options, or as a batch.

use std::time::{Duration, SystemTime};

use crate::{Emitter, Error, Job, Message, MessageBuilder, Priority};

impl Emitter {
    /// Sends `job` at its priority ([`Job::PRIORITY`]), due now, and returns its message id.
    /// Use [`job`](Emitter::job) to choose the priority, a delay or the id.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), hermes_core::Error> {
    /// use hermes_core::{Emitter, Job};
    /// use hermes_testkit::MemoryDriver;
    /// # #[derive(serde::Serialize, serde::Deserialize)]
    /// # struct SendEmail { to: String }
    /// # impl Job for SendEmail { const TYPE: &'static str = "send-email"; }
    ///
    /// let emitter = Emitter::new(MemoryDriver::new());
    /// let id = emitter.emit_job(&SendEmail { to: "a@b.c".into() }).await?;
    /// assert_eq!(id.len(), 36);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] when `job` does not serialize to a JSON object or array; the
    /// driver's error, as for [`emit`](Emitter::emit).
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have sent the job.
    pub async fn emit_job<J: Job>(&self, job: &J) -> Result<String, Error> {
        self.job(job).send().await
    }

    /// A builder for sending `job` once, with a priority, a delay or due time, or an id of your
    /// choosing; [`send`](JobEmit::send) sends it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), hermes_core::Error> {
    /// use std::time::Duration;
    /// use hermes_core::{Driver, Emitter, Job};
    /// use hermes_testkit::MemoryDriver;
    /// # #[derive(serde::Serialize, serde::Deserialize)]
    /// # struct SendEmail { to: String }
    /// # impl Job for SendEmail { const TYPE: &'static str = "send-email"; }
    ///
    /// let driver = MemoryDriver::new();
    /// driver.setup_priority_queue("urgent", 110)?;
    /// let emitter = Emitter::new(driver);
    /// let job = SendEmail { to: "a@b.c".into() };
    /// emitter
    ///     .job(&job)
    ///     .priority(110)
    ///     .delay(Duration::from_secs(60))
    ///     .id("welcome-mail-42")
    ///     .send()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn job<'a, J: Job>(&'a self, job: &'a J) -> JobEmit<'a, J> {
        JobEmit {
            emitter: self,
            job,
            priority: J::PRIORITY,
            due: Due::Now,
            id: None,
            tracked: false,
        }
    }

    /// Sends `jobs` at their priority ([`Job::PRIORITY`]), due now, in as few requests as the
    /// driver allows (see [`emit_batch`](Emitter::emit_batch)), and returns their message ids
    /// in order. For other priorities or delays, build the messages with
    /// [`JobEmit::message`] or [`Message::from_job`] and use `emit_batch`.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] when a job does not serialize to a JSON object or array (then
    /// nothing is sent); otherwise as [`emit_batch`](Emitter::emit_batch).
    ///
    /// # Cancellation safety
    /// Dropping the future may have sent some of the jobs, none or all.
    pub async fn emit_jobs<J: Job>(&self, jobs: &[J]) -> Result<Vec<String>, Error> {
        let messages = jobs
            .iter()
            .map(Message::from_job)
            .collect::<Result<Vec<_>, _>>()?;
        self.emit_batch(&messages, J::PRIORITY).await?;
        Ok(messages.iter().map(|m| m.id().to_owned()).collect())
    }
}

/// One job about to be sent, with its options; made by [`Emitter::job`]. Its `Debug` shows
/// the options, not the job.
#[must_use = "a job is only sent by `.send().await`"]
pub struct JobEmit<'a, J> {
    emitter: &'a Emitter,
    job: &'a J,
    priority: Priority,
    due: Due,
    id: Option<String>,
    tracked: bool,
}

impl<J: Job> std::fmt::Debug for JobEmit<'_, J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobEmit")
            .field("type", &J::TYPE)
            .field("priority", &self.priority)
            .field("due", &self.due)
            .field("id", &self.id)
            .field("tracked", &self.tracked)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy)]
enum Due {
    Now,
    After(Duration),
    At(SystemTime),
}

impl<J: Job> JobEmit<'_, J> {
    /// Sends to the queue of `priority` instead of [`Job::PRIORITY`].
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Makes the job due `delay` from when it is sent; a zero delay means due now (no
    /// `execute_at`).
    pub fn delay(mut self, delay: Duration) -> Self {
        self.due = if delay.is_zero() {
            Due::Now
        } else {
            Due::After(delay)
        };
        self
    }

    /// Makes the job due at `time`.
    pub fn at(mut self, time: SystemTime) -> Self {
        self.due = Due::At(time);
        self
    }

    /// Sends it [tracked](Emitter::emit_tracked): recorded as waiting (or delayed) before it is
    /// sent, and every state it reaches recorded, so [`Emitter::status`] knows it throughout.
    pub fn tracked(mut self) -> Self {
        self.tracked = true;
        self
    }

    /// Gives the message this id instead of a fresh UUID (an empty id means a fresh one).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The message this would send, for [`Emitter::emit_batch`] or a look before sending.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] when the job does not serialize to a JSON object or array, or
    /// the due time is after the year 9999.
    pub fn message(&self) -> Result<Message, Error> {
        let mut builder = MessageBuilder::for_job(self.job);
        if let Some(id) = &self.id {
            builder = builder.id(id.clone());
        }
        builder = match self.due {
            Due::Now => builder,
            Due::After(delay) => builder.delay(delay),
            Due::At(time) => builder.execute_at_time(time),
        };
        builder.build()
    }

    /// Sends the job and returns its message id.
    ///
    /// # Errors
    /// As [`message`](Self::message), then the driver's error as for [`Emitter::emit`].
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have sent the job.
    pub async fn send(self) -> Result<String, Error> {
        let message = self.message()?;
        if self.tracked {
            self.emitter.emit_tracked(&message, self.priority).await?;
        } else {
            self.emitter.emit(&message, self.priority).await?;
        }
        Ok(message.id().to_owned())
    }
}
