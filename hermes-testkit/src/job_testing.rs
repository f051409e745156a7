//! Testing your own jobs: run one through its handlers in process, and see what was queued.

use hermes_core::{Dispatcher, Job, Message, Report};

use crate::MemoryDriver;

/// Runs `job` through the handlers `dispatcher` has registered for its type, here and now, as
/// a worker would run it from the queue of [`Job::PRIORITY`], and returns what came of it.
/// Nothing is queued or acknowledged; a retry copy the job's policy asks for is in
/// [`Report::retry`], not sent. Time limits and log lines are those of a worker
/// ([`Dispatcher::perform`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use hermes_core::{Dispatcher, HandlerOutcome, Job, JobContext};
/// use hermes_testkit::{perform_job, MemoryDriver};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct SendEmail {
///     to: String,
/// }
/// impl Job for SendEmail {
///     const TYPE: &'static str = "send-email";
/// }
///
/// async fn send_email(job: SendEmail, _: JobContext) -> Result<(), String> {
///     if !job.to.contains('@') {
///         return Err(format!("{} is no address", job.to));
///     }
///     Ok(())
/// }
///
/// let mut dispatcher = Dispatcher::new(MemoryDriver::new());
/// dispatcher.register_job(send_email);
///
/// let report = perform_job(&dispatcher, &SendEmail { to: "a@b.c".into() }).await;
/// assert!(report.succeeded(), "{report:?}");
///
/// let report = perform_job(&dispatcher, &SendEmail { to: "nobody".into() }).await;
/// assert_eq!(
///     report.first_failure(),
///     Some(&HandlerOutcome::Failed("nobody is no address".into()))
/// );
/// # }
/// ```
///
/// # Panics
/// When `job` does not serialize to a JSON object or array, which no emit would accept either.
pub async fn perform_job<J: Job>(dispatcher: &Dispatcher, job: &J) -> Report {
    let message = Message::from_job(job)
        .unwrap_or_else(|e| panic!("{} cannot be a message: {e}", std::any::type_name::<J>()));
    dispatcher.perform(&message, J::PRIORITY).await
}

impl MemoryDriver {
    /// The jobs of type `J` waiting or delayed on this driver, in the order of
    /// [`queued_messages`](MemoryDriver::queued_messages): what the code under test emitted.
    /// Messages of other types are left out.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), hermes_core::Error> {
    /// use hermes_core::{Emitter, Job};
    /// use hermes_testkit::MemoryDriver;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Debug, PartialEq, Serialize, Deserialize)]
    /// struct SendEmail {
    ///     to: String,
    /// }
    /// impl Job for SendEmail {
    ///     const TYPE: &'static str = "send-email";
    /// }
    ///
    /// // The code under test emits a job…
    /// async fn sign_up(emitter: &Emitter, email: &str) -> Result<(), hermes_core::Error> {
    ///     emitter.emit_job(&SendEmail { to: email.into() }).await?;
    ///     Ok(())
    /// }
    ///
    /// // …and the test sees it queued.
    /// let driver = MemoryDriver::new();
    /// sign_up(&Emitter::new(driver.clone()), "a@b.c").await?;
    /// assert_eq!(driver.queued_jobs::<SendEmail>(), [SendEmail { to: "a@b.c".into() }]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Panics
    /// When a message of type `J::TYPE` does not fit `J`: the test has found a bug.
    pub fn queued_jobs<J: Job>(&self) -> Vec<J> {
        self.queued_messages()
            .into_iter()
            .filter(|(_, m)| m.message_type() == J::TYPE)
            .map(|(_, m)| m.to_job::<J>().unwrap_or_else(|e| panic!("{e}")))
            .collect()
    }
}
