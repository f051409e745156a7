//! A claimed message and the driver's token for it.

use std::any::Any;
use std::fmt;
use std::time::Duration;

use crate::{Error, Message, Priority};

/// A claimed message, handed out by [`Driver::receive`](super::Driver::receive) and given back to
/// [`Driver::ack`](super::Driver::ack) or [`Driver::nack`](super::Driver::nack) of the same
/// driver.
#[derive(Debug)]
pub struct Delivery {
    message: Message,
    priority: Priority,
    receipt: Receipt,
    lease: Option<Duration>,
}

impl Delivery {
    /// A delivery of `message`, found on the queue of `priority`, with the driver's `receipt`.
    pub fn new(message: Message, priority: Priority, receipt: Receipt) -> Self {
        Delivery {
            message,
            priority,
            receipt,
            lease: None,
        }
    }

    /// The same delivery, claimed for `lease` from now: unless it is acknowledged or
    /// [extended](super::Driver::extend) within that time, the backend delivers the message again. The
    /// [`Dispatcher`](crate::Dispatcher) extends the claim of a running handler's message by
    /// `lease` every `lease / 2`, on drivers with [`Capabilities::extend`](super::Capabilities::extend).
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// How long the claim lasted when the message was received; `None` when it does not
    /// expire (the backend redelivers only when the connection goes).
    pub fn lease(&self) -> Option<Duration> {
        self.lease
    }

    /// The message.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// The priority of the queue the message came from.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// The driver's token for this claim.
    pub fn receipt(&self) -> &Receipt {
        &self.receipt
    }
}

/// A driver's own token for a claimed message (a file path, a delivery tag, a receipt handle).
pub struct Receipt(Box<dyn Any + Send + Sync>);

impl Receipt {
    /// Wraps a driver's token.
    pub fn new<T: Any + Send + Sync>(token: T) -> Self {
        Receipt(Box::new(token))
    }

    /// The token, when it is a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }

    /// The token as a `T`, or [`Error::InvalidDelivery`] naming `driver` when the delivery came
    /// from another kind of driver.
    ///
    /// ```
    /// use hermes_core::driver::Receipt;
    ///
    /// let receipt = Receipt::new(7_u64);
    /// assert_eq!(receipt.downcast::<u64>("memory").unwrap(), &7);
    /// assert!(receipt.downcast::<String>("memory").is_err());
    /// ```
    pub fn downcast<T: Any>(&self, driver: &'static str) -> Result<&T, Error> {
        self.get().ok_or_else(|| {
            Error::InvalidDelivery(format!(
                "the delivery was not produced by a {driver} driver"
            ))
        })
    }
}

impl fmt::Debug for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Receipt(..)")
    }
}
