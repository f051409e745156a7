//! The emitter: what application code calls to queue a message.

use std::sync::Arc;

use crate::{Driver, Error, Message, Priority};

/// Sends messages to a driver. Cheap to clone; share one per process.
///
/// ```
/// # async fn demo() -> Result<(), hermes_core::Error> {
/// use hermes_core::{Emitter, Message, DEFAULT_PRIORITY};
/// use hermes_testkit::MemoryDriver;
///
/// let emitter = Emitter::new(MemoryDriver::new());
/// emitter.emit(&Message::new("send-email"), DEFAULT_PRIORITY).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Emitter {
    driver: Arc<dyn Driver>,
}

impl Emitter {
    /// An emitter sending to `driver`.
    pub fn new(driver: impl Driver) -> Self {
        Emitter::from_arc(Arc::new(driver))
    }

    /// An emitter sending to a shared driver.
    pub fn from_arc(driver: Arc<dyn Driver>) -> Self {
        Emitter { driver }
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
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have sent the message.
    pub async fn emit(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        self.driver.send(message, priority).await?;
        self.log_sent(message);
        Ok(())
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
        self.driver.send_batch(messages, priority).await?;
        for message in messages {
            self.log_sent(message);
        }
        Ok(())
    }

    /// The info line of a message the driver has.
    fn log_sent(&self, message: &Message) {
        tracing::info!(
            id = message.id(),
            created = message.created(),
            r#type = message.message_type(),
            payload = %message.payload().map_or_else(|| "null".to_owned(), ToString::to_string),
            "Emitter send message #{} to driver {}",
            message.id(),
            self.driver.name()
        );
    }
}
