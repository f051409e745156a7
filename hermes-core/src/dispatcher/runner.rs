//! One registered handler as the dispatcher sees it, whether it takes a raw [`Message`] or a
//! typed [`Job`].

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::flow::Snooze;
use crate::{BoxError, Handler, Job, JobContext, JobHandler, Message, RetryPolicy};

/// What one run of a registered handler returned (panics and time-outs are the caller's).
pub(super) enum Ran {
    /// `Ok(true)` from a raw handler, `Ok(value)` from a typed one: with the value as JSON,
    /// unless it is `null` (a handler returning `()`).
    Done(Option<serde_json::Value>),
    /// `Ok(false)` from a raw handler.
    NotDone,
    /// The error text.
    Failed(String),
    /// The payload does not fit the job type, for this reason.
    Rejected(String),
    /// The handler returned a [`Snooze`]: run again after this long.
    Snoozed(Duration),
}

impl Ran {
    /// What an error a handler returned means: a snooze, or a failure.
    fn from_error(error: &(dyn std::error::Error + 'static)) -> Ran {
        match Snooze::find(error) {
            Some(snooze) => Ran::Snoozed(snooze.delay()),
            None => Ran::Failed(error.to_string()),
        }
    }
}

/// A registered handler.
#[async_trait]
pub(super) trait Runner: Send + Sync + 'static {
    async fn run(&self, message: &Message, ctx: JobContext) -> Ran;
    fn name(&self) -> Cow<'static, str>;
    fn retry_policy(&self) -> Option<RetryPolicy>;
    fn time_limit(&self) -> Option<Duration>;
    /// Whether this is `handler`, for unregistering it.
    fn is(&self, handler: &Arc<dyn Handler>) -> bool;
}

/// A [`Handler`]: takes the message itself.
pub(super) struct Raw(pub(super) Arc<dyn Handler>);

#[async_trait]
impl Runner for Raw {
    async fn run(&self, message: &Message, _ctx: JobContext) -> Ran {
        match self.0.handle(message).await {
            Ok(true) => Ran::Done(None),
            Ok(false) => Ran::NotDone,
            Err(e) => Ran::from_error(e.get_ref()),
        }
    }

    fn name(&self) -> Cow<'static, str> {
        self.0.name()
    }

    fn retry_policy(&self) -> Option<RetryPolicy> {
        self.0.retry_policy()
    }

    fn time_limit(&self) -> Option<Duration> {
        self.0.time_limit()
    }

    fn is(&self, handler: &Arc<dyn Handler>) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.0), Arc::as_ptr(handler))
    }
}

/// A [`JobHandler`]: takes the payload decoded as `J`.
pub(super) struct Typed<J, H> {
    handler: H,
    job: PhantomData<fn() -> J>,
}

impl<J, H> Typed<J, H> {
    pub(super) fn new(handler: H) -> Self {
        Typed {
            handler,
            job: PhantomData,
        }
    }
}

#[async_trait]
impl<J: Job, H: JobHandler<J>> Runner for Typed<J, H> {
    async fn run(&self, message: &Message, ctx: JobContext) -> Ran {
        let job = match message.to_job::<J>() {
            Ok(job) => job,
            Err(crate::Error::InvalidMessage(reason)) => return Ran::Rejected(reason),
            Err(other) => return Ran::Rejected(other.to_string()),
        };
        match self.handler.handle(job, ctx).await {
            Ok(output) => match serde_json::to_value(&output) {
                Ok(serde_json::Value::Null) => Ran::Done(None),
                Ok(value) => Ran::Done(Some(value)),
                Err(e) => Ran::Rejected(format!("its result cannot be written as JSON: {e}")),
            },
            Err(e) => Ran::from_error(&*Into::<BoxError>::into(e)),
        }
    }

    fn name(&self) -> Cow<'static, str> {
        self.handler.name()
    }

    fn retry_policy(&self) -> Option<RetryPolicy> {
        J::retry_policy()
    }

    fn time_limit(&self) -> Option<Duration> {
        J::TIME_LIMIT
    }

    fn is(&self, _: &Arc<dyn Handler>) -> bool {
        false
    }
}
