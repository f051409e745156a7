//! What a handler knows about the message it runs, and the signals it gets.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::bookkeeping::Tracker;
use crate::driver::Delivery;
use crate::time::from_unix;
use crate::{Driver, Error, Message, Priority};

/// The message a typed handler runs, and its signals: handed to every
/// [`JobHandler`](crate::JobHandler) and closure registered with
/// [`Dispatcher::register_job`](crate::Dispatcher::register_job). Cheap to clone.
///
/// Its [`cancellation_token`](JobContext::cancellation_token) fires when the handler should
/// stop: at a graceful shutdown (the handler then has the dispatcher's grace period), or at the
/// handler's time limit (it then has a short grace before its future is dropped). A handler that
/// does long work checks it, or selects on [`cancelled`](JobContext::cancelled).
///
/// ```
/// use hermes_core::JobContext;
///
/// async fn work(ctx: JobContext) -> Result<(), std::io::Error> {
///     for _step in 0..100 {
///         if ctx.is_cancelled() {
///             return Err(std::io::Error::other("stopped; the message runs again"));
///         }
///         // … one step of the work …
///     }
///     Ok(())
/// }
/// ```
#[derive(Clone)]
pub struct JobContext {
    inner: Arc<Inner>,
}

struct Inner {
    id: String,
    message_type: String,
    priority: Priority,
    retries: u32,
    created: f64,
    execute_at: Option<f64>,
    time_limit: Option<Duration>,
    token: CancellationToken,
    claim: Option<Claim>,
    group: Option<String>,
    tracker: Option<Arc<Tracker>>,
}

/// The delivery a handler runs, for extending its claim.
#[derive(Clone)]
pub(crate) struct Claim {
    pub(crate) driver: Arc<dyn Driver>,
    pub(crate) delivery: Arc<Delivery>,
    /// The claim length the dispatcher renews, in milliseconds; raised by
    /// [`JobContext::extend_claim`].
    pub(crate) lease_ms: Arc<AtomicU64>,
}

impl Claim {
    pub(crate) fn new(driver: Arc<dyn Driver>, delivery: Arc<Delivery>) -> Claim {
        let lease = delivery.lease().unwrap_or_default();
        Claim {
            driver,
            delivery,
            lease_ms: Arc::new(AtomicU64::new(millis(lease))),
        }
    }

    /// The claim length to renew.
    pub(crate) fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms.load(Ordering::Relaxed))
    }
}

impl JobContext {
    pub(crate) fn new(
        message: &Message,
        priority: Priority,
        time_limit: Option<Duration>,
        token: CancellationToken,
        claim: Option<Claim>,
    ) -> JobContext {
        JobContext {
            inner: Arc::new(Inner {
                id: message.id().to_owned(),
                message_type: message.message_type().to_owned(),
                priority,
                retries: message.retries(),
                created: message.created(),
                execute_at: message.execute_at(),
                time_limit,
                token,
                claim,
                group: message.group().map(str::to_owned),
                tracker: None,
            }),
        }
    }

    /// This context, reporting progress to `tracker`.
    pub(crate) fn with_tracker(mut self, tracker: Option<Arc<Tracker>>) -> JobContext {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.tracker = tracker;
        }
        self
    }

    /// A context for a handler run outside a dispatcher (in a test, say): `message` at
    /// `priority`, no time limit, a token that fires only when the caller cancels it, and no
    /// claim to extend.
    ///
    /// ```
    /// use hermes_core::{CancellationToken, JobContext, Message, DEFAULT_PRIORITY};
    ///
    /// let token = CancellationToken::new();
    /// let ctx = JobContext::detached(&Message::new("ping"), DEFAULT_PRIORITY, token.clone());
    /// assert_eq!((ctx.message_type(), ctx.retries()), ("ping", 0));
    /// token.cancel();
    /// assert!(ctx.is_cancelled());
    /// ```
    pub fn detached(message: &Message, priority: Priority, token: CancellationToken) -> Self {
        JobContext::new(message, priority, None, token, None)
    }

    /// The message id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The message type.
    pub fn message_type(&self) -> &str {
        &self.inner.message_type
    }

    /// The priority of the queue the message came from.
    pub fn priority(&self) -> Priority {
        self.inner.priority
    }

    /// How many times the message was retried before this run (0 on the first run).
    pub fn retries(&self) -> u32 {
        self.inner.retries
    }

    /// When the message was first emitted.
    pub fn created(&self) -> SystemTime {
        from_unix(self.inner.created)
    }

    /// When the message was due: its `execute_at`, or its creation time when it had none.
    pub fn due(&self) -> SystemTime {
        from_unix(self.inner.execute_at.unwrap_or(self.inner.created))
    }

    /// The time limit of this run, if any.
    pub fn time_limit(&self) -> Option<Duration> {
        self.inner.time_limit
    }

    /// The token that fires when the handler should stop: at shutdown or at its time limit.
    pub fn cancellation_token(&self) -> &CancellationToken {
        &self.inner.token
    }

    /// Whether the handler has been asked to stop.
    pub fn is_cancelled(&self) -> bool {
        self.inner.token.is_cancelled()
    }

    /// Completes when the handler is asked to stop.
    ///
    /// # Cancellation safety
    /// Safe to drop and call again.
    pub async fn cancelled(&self) {
        self.inner.token.cancelled().await;
    }

    /// The batch or workflow the job belongs to (a batch's callbacks too): its id, for
    /// [`Emitter::add_to_batch`](crate::Emitter::add_to_batch) or
    /// [`Emitter::batch_status`](crate::Emitter::batch_status).
    pub fn group(&self) -> Option<&str> {
        self.inner.group.as_deref()
    }

    /// Reports how far the job is, from 0 to 100 (more counts as 100), with an optional note
    /// of what it is doing (cut at [`MAX_NOTE_LEN`](crate::tracking::MAX_NOTE_LEN) bytes): kept
    /// in the job's record, where [`Emitter::status`](crate::Emitter::status) reads it at once.
    /// Each call is one write to the backend; nothing happens outside a worker or on a
    /// backend that keeps no records.
    ///
    /// # Errors
    /// The backend's, when the write failed; the job goes on regardless.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have recorded it.
    pub async fn progress(&self, percent: u8, note: Option<&str>) -> Result<(), Error> {
        match &self.inner.tracker {
            Some(tracker) => tracker.progress(percent, note).await,
            None => Ok(()),
        }
    }

    /// Keeps the message claimed for at least `by` from now, and from then on renews its claim
    /// by at least `by` while the handler runs, so a handler that knows it will be slow (or
    /// will block its thread for a while) is not run a second time meanwhile. The dispatcher
    /// already renews claims by the driver's lease; this only lengthens them. Does nothing on
    /// drivers whose claims do not expire, and outside a dispatcher.
    ///
    /// ```
    /// use std::time::Duration;
    /// use hermes_core::JobContext;
    ///
    /// async fn import(ctx: JobContext) -> Result<(), hermes_core::Error> {
    ///     // The next step blocks its thread for up to ten minutes.
    ///     ctx.extend_claim(Duration::from_secs(15 * 60)).await?;
    ///     // … the blocking step …
    ///     Ok(())
    /// }
    /// ```
    ///
    /// # Errors
    /// The driver's error; the claim then stays as it was.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have extended the claim.
    pub async fn extend_claim(&self, by: Duration) -> Result<(), Error> {
        let Some(claim) = &self.inner.claim else {
            return Ok(());
        };
        if !claim.driver.capabilities().extend {
            return Ok(());
        }
        claim.driver.extend(&claim.delivery, by).await?;
        claim.lease_ms.fetch_max(millis(by), Ordering::Relaxed);
        Ok(())
    }
}

impl fmt::Debug for JobContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobContext")
            .field("id", &self.inner.id)
            .field("type", &self.inner.message_type)
            .field("priority", &self.inner.priority)
            .field("retries", &self.inner.retries)
            .field("time_limit", &self.inner.time_limit)
            .field("cancelled", &self.inner.token.is_cancelled())
            .finish_non_exhaustive()
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
