//! Registering handlers on a dispatcher.

use std::future::Future;
use std::sync::Arc;

use super::Dispatcher;
use super::runner::{Raw, Runner, Typed};
use crate::job_handler::JobFn;
use crate::{
    BoxError, Handler, HandlerError, IntoHandler, Job, JobContext, JobHandler, Message, handler_fn,
};

impl Dispatcher {
    /// Adds the async function `f` as a handler of the job `J`, after the handlers already
    /// registered for `J::TYPE`. `f` takes the decoded job and its [`JobContext`] and returns
    /// `Result<R, E>` for any error type `E` that converts into a boxed error: a
    /// `std::error::Error`, `anyhow::Error`, a `String` or a `&'static str`. `R` is the job's
    /// result, any serde type, kept where the backend keeps results (see
    /// [`tracking`](crate::tracking)); `()` keeps none.
    ///
    /// The handler's name in log lines is the function's path. Retries and the time limit are
    /// `J`'s ([`Job::retry_policy`], [`Job::TIME_LIMIT`]). A message whose payload does not fit
    /// `J` fails for good without running `f`, logged with its id and the reason (the field
    /// path and the expected type, never a value).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), hermes_core::Error> {
    /// use hermes_core::{Dispatcher, Emitter, Job, JobContext};
    /// use hermes_testkit::MemoryDriver;
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
    /// async fn send_email(job: SendEmail, ctx: JobContext) -> Result<(), std::io::Error> {
    ///     println!("mailing {} (message #{})", job.to, ctx.id());
    ///     Ok(())
    /// }
    ///
    /// let driver = MemoryDriver::new();
    /// Emitter::new(driver.clone()).emit_job(&SendEmail { to: "a@b.c".into() }).await?;
    ///
    /// let mut dispatcher = Dispatcher::new(driver).max_items(1);
    /// dispatcher.register_job(send_email);
    /// // A closure works too; annotate the job type.
    /// dispatcher.register_job(|job: SendEmail, _ctx| async move {
    ///     if job.to.is_empty() {
    ///         return Err("no address".to_owned());
    ///     }
    ///     Ok(())
    /// });
    /// dispatcher.handle(&[]).await?;
    /// # Ok(()) }
    /// ```
    pub fn register_job<J, F, Fut, R, E>(&mut self, f: F) -> &mut Self
    where
        J: Job,
        F: Fn(J, JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, E>> + Send + 'static,
        R: serde::Serialize + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.register_job_handler::<J>(JobFn(f))
    }

    /// Adds `f` as a handler of the [`Step`](crate::tracking::Step) `J`, as
    /// [`register_job`](Self::register_job) does, holding it to returning `J`'s output: the
    /// job of the step after it in a [`Chain`](crate::tracking::Chain) or
    /// [`Workflow`](crate::tracking::Workflow).
    pub fn register_step<J, F, Fut, E>(&mut self, f: F) -> &mut Self
    where
        J: crate::tracking::Step,
        F: Fn(J, JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<J::Output, E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        self.register_job_handler::<J>(JobFn(f))
    }

    /// Adds `handler` for the job `J`, after the handlers already registered for `J::TYPE`; the
    /// trait form of [`register_job`](Self::register_job), for handlers that hold state. An
    /// `Arc<H>` works too, to share one handler.
    pub fn register_job_handler<J: Job>(&mut self, handler: impl JobHandler<J>) -> &mut Self {
        let limits = J::limits();
        if !limits.is_empty() {
            // A refused limit is kept and returned by `handle`.
            let _ = self.limits.set(J::TYPE, limits);
        }
        self.add(J::TYPE.to_owned(), Arc::new(Typed::<J, _>::new(handler)))
    }

    /// Sets the [limits](crate::flow::Limits) of `message_type`, replacing any (those of a
    /// [`Job`] are set when its handler is registered): how many run at once and how often
    /// they start, across every worker of the backend. Per-key limits count messages by their
    /// [`limit_key`](Message::limit_key).
    ///
    /// ```
    /// use hermes_core::Dispatcher;
    /// use hermes_core::flow::{Limits, Rate};
    /// use hermes_testkit::MemoryDriver;
    ///
    /// let mut dispatcher = Dispatcher::new(MemoryDriver::new());
    /// dispatcher.limit("resize-image", Limits::new().concurrency(2))?;
    /// dispatcher.limit("call-api", Limits::new().rate_per_key(Rate::per_minute(50)))?;
    /// assert!(dispatcher.limit("bad", Limits::new().concurrency(0)).is_err());
    /// # Ok::<(), hermes_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`](crate::Error::Config) when [`Limits::check`](crate::flow::Limits::check)
    /// refuses them; nothing is set then (and [`handle`](Self::handle) refuses to start).
    pub fn limit(
        &mut self,
        message_type: impl Into<String>,
        limits: crate::flow::Limits,
    ) -> Result<&mut Self, crate::Error> {
        self.limits.set(&message_type.into(), limits)?;
        Ok(self)
    }

    /// Adds `handler` for messages of `message_type`, after those already registered. Takes a
    /// handler, an `Arc` of one, or an `Arc<dyn Handler>`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hermes_core::{Dispatcher, EchoHandler, Handler};
    /// use hermes_testkit::MemoryDriver;
    ///
    /// let mut dispatcher = Dispatcher::new(MemoryDriver::new());
    /// dispatcher.register_handler("send-email", EchoHandler::new());
    /// let shared: Arc<dyn Handler> = Arc::new(EchoHandler::new());
    /// dispatcher.register_handler("newsletter", shared.clone());
    /// assert!(dispatcher.unregister_handler("newsletter", &shared));
    /// ```
    pub fn register_handler(
        &mut self,
        message_type: impl Into<String>,
        handler: impl IntoHandler,
    ) -> &mut Self {
        self.add(message_type.into(), Arc::new(Raw(handler.into_handler())))
    }

    /// Adds the async closure `f` as a handler of `message_type`: it takes the [`Message`] and
    /// returns `Ok(true)` when done (see [`Handler`]). Short for
    /// `register_handler(message_type, handler_fn(f))`; use [`handler_fn`] to name it or give
    /// it a retry policy.
    ///
    /// ```
    /// use hermes_core::{Dispatcher, HandlerError};
    /// use hermes_testkit::MemoryDriver;
    ///
    /// let mut dispatcher = Dispatcher::new(MemoryDriver::new());
    /// dispatcher.register_fn("send-email", |message| async move {
    ///     let to = message.payload().and_then(|p| p["to"].as_str().map(str::to_owned));
    ///     let to = to.ok_or_else(|| HandlerError::msg("no address"))?;
    ///     println!("mailing {to}");
    ///     Ok(true)
    /// });
    /// ```
    pub fn register_fn<F, Fut>(&mut self, message_type: impl Into<String>, f: F) -> &mut Self
    where
        F: Fn(Message) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<bool, HandlerError>> + Send + 'static,
    {
        self.register_handler(message_type, handler_fn(f))
    }

    /// Adds several handlers for `message_type`, in order.
    pub fn register_handlers(
        &mut self,
        message_type: impl Into<String>,
        handlers: impl IntoIterator<Item = Arc<dyn Handler>>,
    ) -> &mut Self {
        let message_type = message_type.into();
        for handler in handlers {
            self.add(message_type.clone(), Arc::new(Raw(handler)));
        }
        self
    }

    /// Removes this very handler instance from `message_type`; other instances of the same type
    /// stay. Returns whether it was registered.
    pub fn unregister_handler(&mut self, message_type: &str, handler: &Arc<dyn Handler>) -> bool {
        let Some(list) = self.handlers.get_mut(message_type) else {
            return false;
        };
        let before = list.len();
        list.retain(|h| !h.is(handler));
        let removed = list.len() != before;
        if list.is_empty() {
            self.handlers.remove(message_type);
        }
        removed
    }

    /// Removes every handler of every type.
    pub fn unregister_all_handlers(&mut self) -> &mut Self {
        self.handlers.clear();
        self
    }

    fn add(&mut self, message_type: String, runner: Arc<dyn Runner>) -> &mut Self {
        self.handlers.entry(message_type).or_default().push(runner);
        self
    }
}
