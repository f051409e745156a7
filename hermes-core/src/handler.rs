//! Handlers: the code that runs a message.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::{Message, RetryPolicy};

/// Runs messages of the types it is registered for on a [`Dispatcher`](crate::Dispatcher).
///
/// Return `Ok(true)` when the work is done, `Ok(false)` when it is not and should not be
/// retried, and `Err` when it failed: the dispatcher logs the error and, when
/// [`retry_policy`](Handler::retry_policy) gives a policy, sends a delayed copy of the message.
/// A panic counts as an error.
///
/// This is Hermes' untyped handler. For a serde type, a [`Job`](crate::Job) with a
/// [`JobHandler`](crate::JobHandler) or [`Dispatcher::register_job`](crate::Dispatcher::register_job)
/// is shorter. For a closure, use [`Dispatcher::register_fn`](crate::Dispatcher::register_fn)
/// or [`handler_fn`].
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Runs `message`.
    ///
    /// # Cancellation safety
    /// On a graceful shutdown that outlasts its grace period, the future is dropped and the
    /// message is given back to the queue unacknowledged, to be run again.
    async fn handle(&self, message: &Message) -> Result<bool, HandlerError>;

    /// The retry policy for failures of this handler; `None` (the default) never retries.
    fn retry_policy(&self) -> Option<RetryPolicy> {
        None
    }

    /// The name in log lines; the type name by default.
    fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed(std::any::type_name::<Self>())
    }

    /// How long one run may take before its future is dropped and it counts as failed (see
    /// [`DispatcherOptions::time_limit`](crate::DispatcherOptions::time_limit), which applies
    /// when this is `None`, the default).
    fn time_limit(&self) -> Option<Duration> {
        None
    }
}

/// What [`Dispatcher::register_handler`](crate::Dispatcher::register_handler) takes: a
/// [`Handler`], an `Arc` of one, or an `Arc<dyn Handler>`.
///
/// ```
/// use std::sync::Arc;
/// use hermes_core::{EchoHandler, Handler, IntoHandler};
///
/// let shared: Arc<dyn Handler> = EchoHandler::new().into_handler();
/// assert_eq!(shared.name(), "EchoHandler");
/// ```
pub trait IntoHandler {
    /// The shared handler.
    fn into_handler(self) -> Arc<dyn Handler>;
}

impl<H: Handler> IntoHandler for H {
    fn into_handler(self) -> Arc<dyn Handler> {
        Arc::new(self)
    }
}

impl<H: Handler> IntoHandler for Arc<H> {
    fn into_handler(self) -> Arc<dyn Handler> {
        self
    }
}

impl IntoHandler for Arc<dyn Handler> {
    fn into_handler(self) -> Arc<dyn Handler> {
        self
    }
}

/// Why a handler failed: any error, or a plain message.
///
/// Any `std::error::Error` converts into it, so `?` works inside a handler.
pub struct HandlerError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl HandlerError {
    /// An error with the text `message`.
    pub fn msg(message: impl fmt::Display) -> Self {
        HandlerError(message.to_string().into())
    }

    /// The underlying error.
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for HandlerError {
    fn from(error: E) -> Self {
        HandlerError(Box::new(error))
    }
}

impl From<HandlerError> for crate::BoxError {
    fn from(error: HandlerError) -> Self {
        error.0
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// A handler made of an async closure that takes the message by value.
///
/// ```
/// use hermes_core::{handler_fn, HandlerError, Message, RetryPolicy};
///
/// let handler = handler_fn(|message: Message| async move {
///     if message.payload().is_none() {
///         return Err(HandlerError::msg("no payload"));
///     }
///     Ok(true)
/// })
/// .named("mailer")
/// .with_retry(RetryPolicy::default());
/// ```
pub fn handler_fn<F, Fut>(f: F) -> FnHandler<F>
where
    F: Fn(Message) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<bool, HandlerError>> + Send + 'static,
{
    FnHandler {
        f,
        name: Cow::Borrowed("closure"),
        retry: None,
        time_limit: None,
    }
}

/// The handler [`handler_fn`] makes.
pub struct FnHandler<F> {
    f: F,
    name: Cow<'static, str>,
    retry: Option<RetryPolicy>,
    time_limit: Option<Duration>,
}

impl<F> FnHandler<F> {
    /// Sets the name used in log lines.
    pub fn named(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = name.into();
        self
    }

    /// Retries failures with `policy`.
    pub fn with_retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// Limits each run to `limit` (see [`Handler::time_limit`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use hermes_core::{handler_fn, Handler};
    ///
    /// let handler = handler_fn(|_message| async { Ok(true) })
    ///     .with_time_limit(Duration::from_secs(10));
    /// assert_eq!(handler.time_limit(), Some(Duration::from_secs(10)));
    /// ```
    pub fn with_time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = Some(limit);
        self
    }
}

impl<F> fmt::Debug for FnHandler<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnHandler")
            .field("name", &self.name)
            .field("retry", &self.retry)
            .field("time_limit", &self.time_limit)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl<F, Fut> Handler for FnHandler<F>
where
    F: Fn(Message) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<bool, HandlerError>> + Send + 'static,
{
    async fn handle(&self, message: &Message) -> Result<bool, HandlerError> {
        (self.f)(message.clone()).await
    }

    fn retry_policy(&self) -> Option<RetryPolicy> {
        self.retry.clone()
    }

    fn name(&self) -> Cow<'static, str> {
        self.name.clone()
    }

    fn time_limit(&self) -> Option<Duration> {
        self.time_limit
    }
}

/// Prints each message and its payload to standard output and returns `true`. Retries with the
/// default policy. The examples use it.
#[derive(Debug, Clone, Default)]
pub struct EchoHandler {
    retry: RetryPolicy,
}

impl EchoHandler {
    /// An echo handler with the default retry policy.
    pub fn new() -> Self {
        EchoHandler::default()
    }
}

#[async_trait]
impl Handler for EchoHandler {
    async fn handle(&self, message: &Message) -> Result<bool, HandlerError> {
        let payload = message
            .payload()
            .map_or_else(|| "null".to_owned(), ToString::to_string);
        println!(
            "Received message: #{} (type {})\nPayload: {payload}",
            message.id(),
            message.message_type()
        );
        Ok(true)
    }

    fn retry_policy(&self) -> Option<RetryPolicy> {
        Some(self.retry.clone())
    }

    fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed("EchoHandler")
    }
}
