//! Typed handlers: the code that runs a [`Job`].

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;

use crate::{BoxError, Job, JobContext};

/// Runs jobs of type `J`: the trait form of [`Dispatcher::register_job`](crate::Dispatcher::register_job), for handlers that hold
/// state (a database pool, a client). Register it with
/// [`Dispatcher::register_job_handler`](crate::Dispatcher::register_job_handler).
///
/// `Ok(output)` means done; the output is the job's result, kept by id where the backend keeps
/// results (see [`tracking`](crate::tracking)); `()` keeps none. An `Err` is logged as `Handler <name> throws exception - <error>` and
/// the message is retried by [`Job::retry_policy`]. A payload that does not fit `J` never
/// reaches the handler: that run fails for good, without retry, since it cannot succeed.
///
/// ```
/// use hermes_core::{async_trait, Dispatcher, Job, JobContext, JobHandler};
/// use hermes_testkit::MemoryDriver;
/// # #[derive(serde::Serialize, serde::Deserialize)]
/// # struct SendEmail { to: String }
/// # impl Job for SendEmail { const TYPE: &'static str = "send-email"; }
///
/// struct Mailer {
///     from: String,
/// }
///
/// #[async_trait]
/// impl JobHandler<SendEmail> for Mailer {
///     type Output = ();
///     type Error = std::io::Error;
///
///     async fn handle(&self, job: SendEmail, _ctx: JobContext) -> Result<(), Self::Error> {
///         println!("mail from {} to {}", self.from, job.to);
///         Ok(())
///     }
/// }
///
/// let mut dispatcher = Dispatcher::new(MemoryDriver::new());
/// dispatcher.register_job_handler(Mailer { from: "shop@example.com".into() });
/// ```
#[async_trait]
pub trait JobHandler<J: Job>: Send + Sync + 'static {
    /// What a run returns: the job's result, any serde type (`()` for none).
    type Output: serde::Serialize + Send + 'static;

    /// The error a failed run returns: any `std::error::Error`, `anyhow::Error`, a `String` or a
    /// `&'static str`.
    type Error: Into<BoxError>;

    /// Runs `job`.
    ///
    /// # Cancellation safety
    /// The future is dropped when the handler outlasts its time limit by a short grace, or a
    /// graceful shutdown by its grace period; the message then runs again. The context's
    /// cancellation token fires first, so the handler can stop at a safe point.
    async fn handle(&self, job: J, ctx: JobContext) -> Result<Self::Output, Self::Error>;

    /// The name in log lines; the type name by default.
    fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed(std::any::type_name::<Self>())
    }
}

#[async_trait]
impl<J: Job, H: JobHandler<J>> JobHandler<J> for Arc<H> {
    type Output = H::Output;
    type Error = H::Error;

    async fn handle(&self, job: J, ctx: JobContext) -> Result<Self::Output, Self::Error> {
        (**self).handle(job, ctx).await
    }

    fn name(&self) -> Cow<'static, str> {
        (**self).name()
    }
}

/// The handler [`Dispatcher::register_job`](crate::Dispatcher::register_job) makes of a
/// function or closure; its name is the function's.
pub(crate) struct JobFn<F>(pub(crate) F);

#[async_trait]
impl<J, F, Fut, R, E> JobHandler<J> for JobFn<F>
where
    J: Job,
    F: Fn(J, JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, E>> + Send + 'static,
    R: serde::Serialize + Send + 'static,
    E: Into<BoxError> + 'static,
{
    type Output = R;
    type Error = E;

    async fn handle(&self, job: J, ctx: JobContext) -> Result<R, E> {
        (self.0)(job, ctx).await
    }

    fn name(&self) -> Cow<'static, str> {
        Cow::Owned(function_name(std::any::type_name::<F>()))
    }
}

/// A function's path as a name: `app::send_email`, or `app::main::{closure}` for a closure
/// (however deep it is nested).
fn function_name(type_name: &str) -> String {
    const CLOSURE: &str = "::{{closure}}";
    let path = type_name.replace(CLOSURE, "");
    if type_name.ends_with(CLOSURE) {
        format!("{path}::{{closure}}")
    } else {
        path
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn function_names_lose_the_closures_they_sit_in() {
        assert_eq!(
            super::function_name("app::main::{{closure}}::send"),
            "app::main::send"
        );
        assert_eq!(
            super::function_name("app::main::{{closure}}::{{closure}}"),
            "app::main::{closure}"
        );
        assert_eq!(super::function_name("app::send"), "app::send");
    }
}
