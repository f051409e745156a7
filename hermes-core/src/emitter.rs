//! The emitter: what application code calls to queue a message.

use std::sync::Arc;

use tracing::Instrument;

use crate::unique::Release;
use crate::{Driver, Emitted, Error, Message, Priority, Unique};

/// Sends jobs and messages to a driver. Cheap to clone; share one per process.
///
/// Typed jobs go with [`emit_job`](Emitter::emit_job), [`job`](Emitter::job) (a builder for
/// priority, delay and id) and [`emit_jobs`](Emitter::emit_jobs); messages built by hand with
/// [`emit`](Emitter::emit) and [`emit_batch`](Emitter::emit_batch).
///
/// ```
/// # async fn demo() -> Result<(), hermes_core::Error> {
/// use hermes_core::{Emitter, Message, DEFAULT_PRIORITY};
/// use hermes_testkit::MemoryDriver;
///
/// let driver = MemoryDriver::new();
/// let emitter = Emitter::new(driver.clone());
/// emitter.emit(&Message::new("send-email"), DEFAULT_PRIORITY).await?;
/// # Ok(()) }
/// ```
///
/// The log line of each sent message carries its id, created time and type. The payload is left
/// out, as payloads carry personal data, unless [`log_payloads`](Emitter::log_payloads) asks for
/// it (Hermes' own log context has it).
///
/// With the `opentelemetry` feature, `propagate_trace(true)` makes each message carry the W3C
/// trace context of its `hermes.emit` span, so the worker's `hermes.handle` span continues the
/// trace.
#[derive(Debug, Clone)]
pub struct Emitter {
    driver: Arc<dyn Driver>,
    log_payloads: bool,
    #[cfg(feature = "opentelemetry")]
    propagate_trace: bool,
}

impl Emitter {
    /// An emitter sending to `driver`. Drivers are cheap clones: pass a clone of the one the
    /// process also uses elsewhere.
    pub fn new(driver: impl Driver) -> Self {
        Emitter::from_arc(Arc::new(driver))
    }

    /// An emitter sending to a driver held as `Arc<dyn Driver>`.
    pub fn from_arc(driver: Arc<dyn Driver>) -> Self {
        Emitter {
            driver,
            log_payloads: false,
            #[cfg(feature = "opentelemetry")]
            propagate_trace: false,
        }
    }

    /// Whether the log line of each sent message also carries its payload, as Hermes' does.
    /// Default false: payloads often hold personal data.
    #[must_use]
    pub fn log_payloads(mut self, log_payloads: bool) -> Self {
        self.log_payloads = log_payloads;
        self
    }

    /// Whether each message sent carries the W3C trace context of its `hermes.emit` span as
    /// its [`traceparent`](Message::traceparent), so that a worker's `hermes.handle` span
    /// continues the trace: its parent is the `hermes.emit` span, a child of the span `emit`
    /// was called in. Default false.
    ///
    /// It takes effect when the subscriber has a `tracing-opentelemetry` layer and the
    /// `hermes.emit` span is enabled (it is at info level), so that the span has a valid
    /// OpenTelemetry span context; otherwise the message goes as it is. A message that already
    /// has a traceparent keeps it. PHP workers ignore the key; their retry copies drop it.
    #[cfg(feature = "opentelemetry")]
    #[must_use]
    pub fn propagate_trace(mut self, propagate_trace: bool) -> Self {
        self.propagate_trace = propagate_trace;
        self
    }

    /// The driver.
    pub fn driver(&self) -> &Arc<dyn Driver> {
        &self.driver
    }

    /// Sends `message` to the queue of `priority` and logs
    /// `Emitter send message #<id> to driver <name>` at info level.
    ///
    /// # Errors
    /// The driver's error, such as [`Error::UnknownPriority`] for a priority without a queue.
    /// An error does not prove the message was not queued: see [`Driver::send`].
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have sent the message.
    pub async fn emit(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        let span = self.span_of(message, priority);
        #[cfg(feature = "opentelemetry")]
        let traced = self.with_trace_context(std::slice::from_ref(message), &span);
        #[cfg(feature = "opentelemetry")]
        let message = traced.as_ref().map_or(message, |copies| &copies[0]);
        async {
            self.driver.send(message, priority).await?;
            self.log_sent(message, priority);
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// Sends `message` as [`emit`](Emitter::emit) does, unless another message holds the key
    /// of `unique` (see [`Unique`]): then nothing is queued, the answer is
    /// [`Emitted::Duplicate`], and `Emitter skip duplicate message #<id> (key held)` is logged
    /// at info level. The check is atomic on the backend, across processes.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] for a key [`Unique::check`] refuses; [`Error::Unsupported`]
    /// on a driver without the [`unique`](crate::Driver::unique) facet (RabbitMQ and
    /// SQS); otherwise as [`emit`](Emitter::emit).
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have queued the message and taken the key.
    pub async fn emit_unique(
        &self,
        message: &Message,
        priority: Priority,
        unique: &Unique,
    ) -> Result<Emitted, Error> {
        unique.check()?;
        let span = self.span_of(message, priority);
        // Released when done: the message names its key. Otherwise it names none (a message
        // received and emitted again must not give up the key it held).
        let key = match unique.release() {
            Release::WhenDone => Some(unique.key().to_owned()),
            _ => None,
        };
        let holding =
            (message.unique_key() != key.as_deref()).then(|| message.clone().with_unique_key(key));
        let message = holding.as_ref().unwrap_or(message);
        async {
            let emitted = self
                .driver
                .unique()
                .ok_or(Error::Unsupported {
                    driver: self.driver.name(),
                    what: "unique jobs",
                })?
                .send_unique(message, priority, unique)
                .await?;
            match emitted {
                Emitted::Queued => self.log_sent(message, priority),
                Emitted::Duplicate => tracing::info!(
                    id = message.id(),
                    r#type = message.message_type(),
                    "Emitter skip duplicate message #{} (key held)",
                    message.id()
                ),
            }
            Ok(emitted)
        }
        .instrument(span)
        .await
    }

    /// Sends `messages` to the queue of `priority` with the driver's
    /// [`send_batch`](Driver::send_batch) (in as few requests as the backend allows), each with
    /// its own delay as with [`emit`](Emitter::emit), and then logs
    /// `Emitter send message #<id> to driver <name>` at info level for each. An empty slice
    /// does nothing.
    ///
    /// # Errors
    /// The driver's error, such as [`Error::UnknownPriority`] for a priority without a queue or
    /// [`Error::PayloadTooLarge`]. Some of the messages may have been sent by then (the
    /// driver's documentation says which); none is logged.
    ///
    /// # Cancellation safety
    /// Dropping the future may have sent some of the messages, none or all.
    pub async fn emit_batch(&self, messages: &[Message], priority: Priority) -> Result<(), Error> {
        if messages.is_empty() {
            return Ok(());
        }
        let span = tracing::info_span!(
            "hermes.emit",
            count = messages.len(),
            priority,
            driver = self.driver.name(),
        );
        #[cfg(feature = "opentelemetry")]
        let traced = self.with_trace_context(messages, &span);
        #[cfg(feature = "opentelemetry")]
        let messages = traced.as_deref().unwrap_or(messages);
        async {
            self.driver.send_batch(messages, priority).await?;
            for message in messages {
                self.log_sent(message, priority);
            }
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// The `hermes.emit` span of one message.
    fn span_of(&self, message: &Message, priority: Priority) -> tracing::Span {
        tracing::info_span!(
            "hermes.emit",
            id = message.id(),
            r#type = message.message_type(),
            priority,
            driver = self.driver.name(),
        )
    }

    /// Copies of `messages` that carry the trace context of `span` where they had none, when
    /// the emitter propagates traces and the span has a valid one; `None` when nothing changes.
    #[cfg(feature = "opentelemetry")]
    fn with_trace_context(
        &self,
        messages: &[Message],
        span: &tracing::Span,
    ) -> Option<Vec<Message>> {
        if !self.propagate_trace || messages.iter().all(|m| m.traceparent().is_some()) {
            return None;
        }
        let traceparent = crate::traceparent::of_span(span)?;
        Some(
            messages
                .iter()
                .map(|m| match m.traceparent() {
                    Some(_) => m.clone(),
                    None => m.with_traceparent(traceparent.clone()),
                })
                .collect(),
        )
    }

    /// The info line (and the count) of a message the driver has.
    fn log_sent(&self, message: &Message, priority: Priority) {
        crate::telemetry::record_sent(message, priority, self.driver.name(), self.log_payloads);
    }
}
