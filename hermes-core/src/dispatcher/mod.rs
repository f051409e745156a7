//! The dispatcher: the worker loop that takes messages from a driver and runs their handlers.

mod backoff;
mod options;
mod process;
mod worker;

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use options::DispatcherOptions;

use self::process::{Context, HandlerMap};
use crate::{Driver, Error, Handler, Priority, Shutdown};

/// The worker: takes messages from a driver and runs the handlers registered for their type.
///
/// For each message it logs `Start handle message #<id> (<type>) priority:<n>`, runs every
/// handler of the type in registration order (logging `End handle message #<id> (<type>)`
/// after each, or `Handler <name> throws exception - <error>` when one fails or panics), sends
/// one delayed retry copy at the same priority when a failed handler's
/// [`RetryPolicy`](crate::RetryPolicy) allows, and then acknowledges the delivery, whatever the
/// outcome. A message whose type has no handler is consumed.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), hermes_core::Error> {
/// use std::sync::Arc;
/// use hermes_core::{Dispatcher, Emitter, EchoHandler, Message, DEFAULT_PRIORITY};
/// use hermes_testkit::MemoryDriver;
///
/// let driver = Arc::new(MemoryDriver::new());
/// Emitter::from_arc(driver.clone())
///     .emit(&Message::new("send-email"), DEFAULT_PRIORITY)
///     .await?;
///
/// let mut dispatcher = Dispatcher::from_arc(driver).max_items(1);
/// dispatcher.register_handler("send-email", Arc::new(EchoHandler::new()));
/// dispatcher.handle(&[]).await?; // returns after one message
/// # Ok(()) }
/// ```
pub struct Dispatcher {
    driver: Arc<dyn Driver>,
    handlers: HandlerMap,
    shutdowns: Vec<Arc<dyn Shutdown>>,
    cancel: CancellationToken,
    options: DispatcherOptions,
}

impl Dispatcher {
    /// A dispatcher taking messages from `driver`.
    pub fn new(driver: impl Driver) -> Self {
        Dispatcher::from_arc(Arc::new(driver))
    }

    /// A dispatcher taking messages from a shared driver.
    pub fn from_arc(driver: Arc<dyn Driver>) -> Self {
        Dispatcher {
            driver,
            handlers: HandlerMap::new(),
            shutdowns: Vec::new(),
            cancel: CancellationToken::new(),
            options: DispatcherOptions::default(),
        }
    }

    /// Adds a shutdown signal; [`handle`](Self::handle) returns once any of them fires.
    #[must_use]
    pub fn with_shutdown(mut self, shutdown: impl Shutdown) -> Self {
        self.shutdowns.push(Arc::new(shutdown));
        self
    }

    /// Handles up to `n` messages at once (at least 1).
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.options.concurrency = n.max(1);
        self
    }

    /// Stops after `n` messages (0 = no limit).
    #[must_use]
    pub fn max_items(mut self, n: u64) -> Self {
        self.options.max_items = n;
        self
    }

    /// Replaces all options.
    #[must_use]
    pub fn options(mut self, options: DispatcherOptions) -> Self {
        self.options = options;
        self.options.concurrency = self.options.concurrency.max(1);
        self
    }

    /// A token that stops [`handle`](Self::handle) like a shutdown signal when cancelled.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Adds `handler` for messages of `message_type`, after those already registered.
    pub fn register_handler(
        &mut self,
        message_type: impl Into<String>,
        handler: Arc<dyn Handler>,
    ) -> &mut Self {
        self.handlers
            .entry(message_type.into())
            .or_default()
            .push(handler);
        self
    }

    /// Adds several handlers for `message_type`, in order.
    pub fn register_handlers(
        &mut self,
        message_type: impl Into<String>,
        handlers: impl IntoIterator<Item = Arc<dyn Handler>>,
    ) -> &mut Self {
        self.handlers
            .entry(message_type.into())
            .or_default()
            .extend(handlers);
        self
    }

    /// Removes this very handler instance from `message_type`; other instances of the same type
    /// stay. Returns whether it was registered.
    pub fn unregister_handler(&mut self, message_type: &str, handler: &Arc<dyn Handler>) -> bool {
        let Some(list) = self.handlers.get_mut(message_type) else {
            return false;
        };
        let before = list.len();
        list.retain(|h| !std::ptr::addr_eq(Arc::as_ptr(h), Arc::as_ptr(handler)));
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

    /// Takes and handles messages of `priorities` (empty = every queue of the driver), highest
    /// priority first, until a shutdown signal fires, `max_items` messages were taken, or the
    /// driver fails.
    ///
    /// Temporary driver errors (a lost connection) are logged and retried with backoff for
    /// [`DispatcherOptions::temporary_error_timeout`]; undecodable messages are logged and
    /// skipped unless [`DispatcherOptions::stop_on_undecodable`] is set. On a shutdown, running
    /// handlers get [`DispatcherOptions::grace_period`] to finish; the messages of those still
    /// running then are given back unacknowledged.
    ///
    /// Logs `Exiting hermes dispatcher - shutdown` on a shutdown, and
    /// `Exiting hermes dispatcher - driver error: <error>` before returning an error.
    ///
    /// # Errors
    /// The driver's error that stopped the loop: a permanent one, a temporary one that lasted
    /// too long, or an [`Error::UnknownPriority`] for a filter naming a priority without a queue.
    ///
    /// # Cancellation safety
    /// Dropping the future drops the running handlers; their messages are redelivered (after the
    /// visibility timeout on at-least-once drivers). Prefer a shutdown signal.
    pub async fn handle(&self, priorities: &[Priority]) -> Result<(), Error> {
        let stop = self.cancel.child_token();
        let _watchers: Vec<_> = self
            .shutdowns
            .iter()
            .filter_map(|s| s.token())
            .map(|token| {
                let stop = stop.clone();
                AbortOnDrop(tokio::spawn(async move {
                    tokio::select! {
                        () = token.cancelled() => stop.cancel(),
                        () = stop.cancelled() => {},
                    }
                }))
            })
            .collect();

        let ctx = Arc::new(Context {
            driver: self.driver.clone(),
            handlers: self.handlers.clone(),
            shutdowns: self.shutdowns.clone(),
            options: self.options.clone(),
            priorities: priorities.to_vec(),
            started: SystemTime::now(),
            taken: AtomicU64::new(0),
            abort: CancellationToken::new(),
            stop: stop.clone(),
            failure: Mutex::new(None),
        });
        // Each worker receives and handles one message at a time, so a message never crosses
        // tasks between its receive and its acknowledgement.
        let tracker = TaskTracker::new();
        for _ in 0..self.options.concurrency.max(1) {
            let ctx = ctx.clone();
            tracker.spawn(async move { worker::run(&ctx).await });
        }
        tracker.close();
        tokio::select! {
            () = tracker.wait() => {},
            () = stop.cancelled() => {
                if tokio::time::timeout(self.options.grace_period, tracker.wait()).await.is_err() {
                    ctx.abort.cancel();
                    tracker.wait().await;
                }
            }
        }

        if let Err(e) = self.driver.flush().await {
            tracing::warn!("Giving back prefetched messages failed - {e}");
        }
        if let Some(e) = ctx.take_failure() {
            tracing::error!("Exiting hermes dispatcher - driver error: {e}");
            return Err(e);
        }
        if stop.is_cancelled() {
            tracing::info!("Exiting hermes dispatcher - shutdown");
        } else {
            tracing::info!(
                "Exiting hermes dispatcher - handled max items ({})",
                self.options.max_items
            );
        }
        Ok(())
    }

    /// The options in force.
    pub fn current_options(&self) -> &DispatcherOptions {
        &self.options
    }
}

impl fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut types: Vec<_> = self.handlers.keys().collect();
        types.sort();
        f.debug_struct("Dispatcher")
            .field("driver", &self.driver)
            .field("handled_types", &types)
            .field("shutdowns", &self.shutdowns)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
