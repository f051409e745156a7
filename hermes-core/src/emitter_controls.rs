//! Pausing, resuming and cancelling from the application's code, through its emitter.

use crate::driver::Controls;
use crate::flow::{Cancellation, PauseTarget};
use crate::{Emitter, Error};

impl Emitter {
    fn controls(&self) -> Result<&dyn Controls, Error> {
        self.driver().controls().ok_or(Error::Unsupported {
            driver: self.driver().name(),
            what: "pauses and cancellations",
        })
    }

    /// Pauses `target` for every worker of the backend: within a second none starts a message
    /// it covers; running ones finish. It stays paused, across worker restarts, until
    /// [`resume`](Self::resume).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), hermes_core::Error> {
    /// use hermes_core::flow::PauseTarget;
    /// use hermes_core::{Emitter, DEFAULT_PRIORITY};
    /// use hermes_testkit::MemoryDriver;
    ///
    /// let emitter = Emitter::new(MemoryDriver::new());
    /// emitter.pause(&PauseTarget::Type("send-newsletter".into())).await?;
    /// emitter.pause(&PauseTarget::Priority(DEFAULT_PRIORITY)).await?;
    /// assert_eq!(emitter.paused().await?.len(), 2);
    /// assert!(emitter.resume(&PauseTarget::Priority(DEFAULT_PRIORITY)).await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Unsupported`] on a driver without the
    /// [`controls`](crate::Driver::controls) facet; connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have paused it.
    pub async fn pause(&self, target: &PauseTarget) -> Result<(), Error> {
        self.controls()?.pause(target).await?;
        tracing::info!("Paused {target}");
        Ok(())
    }

    /// Resumes `target`; returns whether it was paused. Workers start its messages again
    /// within a second (messages of a paused type they already put back run when due: at most
    /// 30 s later).
    ///
    /// # Errors
    /// As [`pause`](Self::pause).
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have resumed it.
    pub async fn resume(&self, target: &PauseTarget) -> Result<bool, Error> {
        let was = self.controls()?.resume(target).await?;
        tracing::info!("Resumed {target}");
        Ok(was)
    }

    /// What is paused.
    ///
    /// # Errors
    /// As [`pause`](Self::pause).
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    pub async fn paused(&self) -> Result<Vec<PauseTarget>, Error> {
        self.controls()?.paused().await
    }

    /// Cancels the message `id`, saying who asks (`by`: a user, a host, a service). A worker
    /// that meets it waiting or delayed does not run it and keeps it as a dead letter of kind
    /// [`Cancelled`](crate::inspect::DeadKind::Cancelled) (or drops it on a backend without
    /// dead letters); a worker running it fires its handler's cancellation token within a
    /// second, and the run ends as cancelled: not retried, not dead. The request is kept
    /// [`CANCELLATIONS_KEPT`](crate::flow::CANCELLATIONS_KEPT).
    ///
    /// # Errors
    /// As [`pause`](Self::pause).
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have recorded the request.
    pub async fn cancel(&self, id: &str, by: &str) -> Result<(), Error> {
        self.controls()?.cancel(&Cancellation::new(id, by)).await?;
        tracing::info!("Cancelled message #{id} (by {by})");
        Ok(())
    }
}
