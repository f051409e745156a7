//! The contract between Hermes and a queue backend, and what writing a backend takes.
//!
//! Applications meet [`Driver`] as the type of a queue (`Arc<dyn Driver>`, or a backend's own
//! type); everything else in this module is for those who write a backend or wrap one:
//!
//! - [`Driver`]: what every backend does to deliver: send, receive, acknowledge, give back,
//!   extend a claim. [`Capabilities`] declares its delivery guarantees.
//! - Facets, each a trait of its own that a backend implements when it can, reached from the
//!   driver: [`Inspect`] (figures, purge), [`Browse`] (peek, delete by id), [`DeadLetters`],
//!   [`Workers`] (live workers), [`UniqueEmits`], [`LimitStore`], [`Controls`], [`JobStore`]
//!   (results, status, batches and workflows).
//! - [`forward!`]: the forwarding helper for a driver that wraps another: one line forwards the
//!   calls it names and, with `facets`, every facet of the inner driver, now and as facets are
//!   added.
//! - Helpers every backend uses: [`PriorityQueues`], [`DriverUrl`], [`validate_queue_name`],
//!   [`bounded`], [`excerpt`], [`task`].
//!
//! A driver that only delivers:
//!
//! ```
//! use std::collections::VecDeque;
//! use std::sync::Mutex;
//! use std::time::Duration;
//!
//! use hermes_core::driver::{Capabilities, Delivery, Driver, Receipt, async_trait};
//! use hermes_core::{DEFAULT_PRIORITY, Error, Message, Priority};
//!
//! /// One queue in memory, at most once: a taken message is gone.
//! #[derive(Debug, Default)]
//! struct Fifo(Mutex<VecDeque<Message>>);
//!
//! #[async_trait]
//! impl Driver for Fifo {
//!     fn name(&self) -> &'static str {
//!         "fifo"
//!     }
//!     fn capabilities(&self) -> Capabilities {
//!         Capabilities::default()
//!     }
//!     fn setup_priority_queue(&self, _name: &str, _priority: Priority) -> Result<(), Error> {
//!         Err(Error::Unsupported { driver: "fifo", what: "priorities" })
//!     }
//!     async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
//!         if priority != DEFAULT_PRIORITY {
//!             return Err(Error::UnknownPriority(priority));
//!         }
//!         self.0.lock().unwrap().push_back(message.clone());
//!         Ok(())
//!     }
//!     async fn receive(&self, _: &[Priority], _: Duration) -> Result<Option<Delivery>, Error> {
//!         let message = self.0.lock().unwrap().pop_front();
//!         Ok(message.map(|m| Delivery::new(m, DEFAULT_PRIORITY, Receipt::new(()))))
//!     }
//!     async fn ack(&self, _: &Delivery) -> Result<(), Error> {
//!         Ok(())
//!     }
//!     async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
//!         self.0.lock().unwrap().push_front(delivery.message().clone());
//!         Ok(())
//!     }
//! }
//! ```
//!
//! The guide's chapter "Writing a driver" gives the layout every backend crate of this
//! repository follows, and how to run the conformance suite of `hermes-testkit` on a driver.

use std::fmt;
use std::time::Duration;

use crate::{Error, Message};

mod bounded;
mod delivery;
mod facets;
mod forward;
mod job_store;
mod memory_store;
mod priority_queues;
mod queue_name;
pub mod task;
mod url;
mod with_store;

pub use bounded::{CALL_TIMEOUT, bounded, bounded_until, deadline, no_answer};
pub use delivery::{Delivery, Receipt};
pub use facets::{
    Browse, Controls, Counters, DeadLetters, Inspect, LimitStore, UniqueEmits, Workers,
};
pub use job_store::{
    INTERNAL_MARK, JobStore, Settle, UNFINISHED_GROUP_KEPT, claim_mark, claimant_in, mark_in,
};
pub use memory_store::MemoryStore;
pub use priority_queues::PriorityQueues;
pub use queue_name::validate_queue_name;
pub use url::DriverUrl;
pub use with_store::WithStore;

pub use crate::error::{EXCERPT_LIMIT, excerpt};
#[doc(inline)]
pub use crate::forward;
pub use crate::message::LATEST_DUE;
pub use crate::unique::unique_backend_name;
/// Re-exported for implementing [`Driver`] and its facets.
pub use async_trait::async_trait;

/// A priority: a higher number is handled first.
pub type Priority = i32;

/// The priority of Hermes' default queue.
pub const DEFAULT_PRIORITY: Priority = 100;

/// A queue backend: sends messages and hands them out to workers.
///
/// The contract is pull-and-acknowledge: [`receive`](Driver::receive) claims one due message,
/// and after the handlers ran the dispatcher calls [`ack`](Driver::ack) (done, remove it) or
/// [`nack`](Driver::nack) (give it back for redelivery now). On drivers that declare
/// [`Capabilities::at_least_once`], a claimed message that is neither acknowledged nor given back
/// within the visibility timeout — its worker crashed — is delivered again.
///
/// Rules every driver keeps (the conformance suite in `hermes-testkit` checks them):
/// - `send` to a priority without a queue, and `receive` with a filter naming one, fail with
///   [`Error::UnknownPriority`].
/// - A message whose `execute_at` is in the future is not delivered before it is due.
/// - [`send_batch`](Driver::send_batch) has the outcome of one `send` per message: each keeps
///   its delay and its fields, and arrives once.
/// - A message that cannot be decoded never reaches a handler, is never lost and never
///   delivered forever: the driver moves it to its quarantine and `receive` returns
///   [`Error::Undecodable`].
///
/// What a backend does beyond delivering is a facet, reached through the accessors at the end
/// of the trait ([`inspect`](Driver::inspect), [`browse`](Driver::browse),
/// [`dead_letters`](Driver::dead_letters), [`workers`](Driver::workers),
/// [`unique`](Driver::unique)); each answers `None` unless the backend has it. A driver that
/// wraps another forwards them with [`forward!`].
///
/// The trait is object safe and implemented for `Arc<D>` and `Box<D>`, so `Arc<dyn Driver>`
/// works wherever a driver does.
#[async_trait]
pub trait Driver: fmt::Debug + Send + Sync + 'static {
    /// A short name for logs, such as `"redis"` or `"filesystem"`.
    fn name(&self) -> &'static str;

    /// What this driver guarantees when it delivers.
    fn capabilities(&self) -> Capabilities;

    /// Adds a queue called `name` for `priority`. The default queue (priority
    /// [`DEFAULT_PRIORITY`]) exists from the start. Setting up a priority again replaces its name.
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for a name that is not letters, digits, `.`, `_` and `-`, or
    /// that starts with `.`; [`Error::Unsupported`] on a driver without priorities.
    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error>;

    /// Puts `message` on the queue of `priority`, delayed until its `execute_at` when that is in
    /// the future. Returns once the backend has the message.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`] for a priority without a queue; [`Error::InvalidMessage`] for
    /// a message [`Message::check`] refuses (a due time after the year 9999);
    /// [`Error::PayloadTooLarge`]; connection errors.
    ///
    /// An error does not always mean the message was not queued: when a request times out or
    /// the connection drops after the backend received it, the message may be delivered
    /// although `send` failed. Sending it again then queues it twice, so make handlers
    /// idempotent (at-least-once delivery asks that of them anyway).
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have sent the message.
    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error>;

    /// Puts `messages` on the queue of `priority`, with the same outcome as sending them one
    /// by one with [`send`](Driver::send) in order: each message keeps its own delay (its
    /// `execute_at`), and each is delivered once. Returns once the backend has all of them.
    /// Drivers whose backend takes several messages per request override it; the default
    /// sends each with `send`, in order, and stops at the first error. An empty slice sends
    /// nothing.
    ///
    /// # Errors
    /// As [`send`](Driver::send). On an error some of the messages may have been sent (for the
    /// default: those before the one that failed); the driver's documentation says which.
    ///
    /// # Cancellation safety
    /// Dropping the future may have sent some of the messages, none or all.
    async fn send_batch(&self, messages: &[Message], priority: Priority) -> Result<(), Error> {
        for message in messages {
            self.send(message, priority).await?;
        }
        Ok(())
    }

    /// Waits up to `wait` for a due message on the queues of `priorities` (empty = all),
    /// highest priority first, and claims it. `Ok(None)` when none arrived in time.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`] for a filter naming a priority without a queue;
    /// [`Error::Undecodable`] when the message it took could not be decoded (it is quarantined,
    /// and the next call goes on with the next message); connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future loses no message: a message it had already claimed is delivered
    /// again (at once, or after the visibility timeout).
    async fn receive(
        &self,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error>;

    /// Marks `delivery` done: the message is removed for good. Acknowledging a delivery whose
    /// lease already expired has no effect on the redelivered copy (nor has giving it back or
    /// extending it): every operation applies only to the claim it was handed.
    ///
    /// # Errors
    /// [`Error::InvalidDelivery`] for a delivery of another driver; connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have acknowledged the message; if not, it is
    /// delivered again.
    async fn ack(&self, delivery: &Delivery) -> Result<(), Error>;

    /// Gives `delivery` back for redelivery now, as if it had never been claimed.
    ///
    /// # Errors
    /// [`Error::InvalidDelivery`] for a delivery of another driver; connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have given the message back; if not, it is
    /// delivered again once its claim expires.
    async fn nack(&self, delivery: &Delivery) -> Result<(), Error>;

    /// Keeps `delivery` claimed for `by` more from now, so a slow handler is not run twice.
    /// Drivers without [`Capabilities::extend`] return `Ok` and do nothing.
    ///
    /// # Errors
    /// [`Error::InvalidDelivery`] when the claim already expired; connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have extended the claim.
    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        let _ = (delivery, by);
        Ok(())
    }

    /// Finishes what the driver holds for this process: gives back messages it claimed ahead
    /// (prefetched) but did not hand out, and settles what it deferred. The
    /// [`Dispatcher`](crate::Dispatcher) calls it when `handle` returns. Drivers without such
    /// state do nothing.
    ///
    /// # Errors
    /// Connection errors; what was not given back is delivered again after its claim expires.
    ///
    /// # Cancellation safety
    /// Dropping the future may leave some of it undone, with the same outcome as an error.
    async fn flush(&self) -> Result<(), Error> {
        Ok(())
    }

    /// The queues' figures, and purging them; `None` when the backend cannot count.
    fn inspect(&self) -> Option<&dyn Inspect> {
        None
    }

    /// Single messages read without claiming them, and removed by id; `None` when the backend
    /// cannot list its messages.
    fn browse(&self) -> Option<&dyn Browse> {
        None
    }

    /// Dead letters kept, listed and replayed; `None` when the backend keeps none (the
    /// dispatcher then acknowledges a message that failed for good).
    fn dead_letters(&self) -> Option<&dyn DeadLetters> {
        None
    }

    /// Live workers announced and listed; `None` when the backend has nowhere to keep them.
    fn workers(&self) -> Option<&dyn Workers> {
        None
    }

    /// Unique emits, atomic on the backend; `None` when the backend cannot refuse a message
    /// whose key another one holds.
    fn unique(&self) -> Option<&dyn UniqueEmits> {
        None
    }

    /// The shared state of [limits](crate::flow::Limits); `None` when the backend has nowhere
    /// to keep it (see [`WithStore`] for taking another backend's).
    fn limits(&self) -> Option<&dyn LimitStore> {
        None
    }

    /// Pauses and cancellations; `None` when the backend has nowhere to keep them (see
    /// [`WithStore`] for taking another backend's).
    fn controls(&self) -> Option<&dyn Controls> {
        None
    }

    /// What became of jobs (status, result, progress) and the state of batches and
    /// workflows; `None` when the backend has nowhere to keep them.
    fn jobs(&self) -> Option<&dyn JobStore> {
        None
    }

    /// Counters of what the workers did, for the dashboard's history; `None` when the backend
    /// has nowhere to keep them (see [`WithStore`] for taking another backend's).
    fn counters(&self) -> Option<&dyn Counters> {
        None
    }
}

/// What a driver guarantees when it delivers. The conformance suite runs the scenarios of every
/// declared capability and skips the others; what a driver can do beyond delivering is told by
/// its facets instead ([`Driver::inspect`] and its siblings).
///
/// Build one from [`Capabilities::default`] (nothing declared) or [`Capabilities::all`] and
/// set the fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Capabilities {
    /// Messages with a future `execute_at` wait until due.
    pub delay: bool,
    /// Several priority queues, highest handled first.
    pub priorities: bool,
    /// Messages of one priority come out in the order they went in.
    pub fifo: bool,
    /// A claimed message that is not acknowledged within the visibility timeout is delivered
    /// again (a crashed worker loses nothing).
    pub at_least_once: bool,
    /// [`Driver::extend`] prolongs a claim.
    pub extend: bool,
    /// The largest encoded message the driver accepts, in bytes; `None` for no limit.
    pub max_payload: Option<usize>,
}

impl Capabilities {
    /// Every guarantee, no payload limit.
    pub fn all() -> Self {
        Capabilities {
            delay: true,
            priorities: true,
            fifo: true,
            at_least_once: true,
            extend: true,
            max_payload: None,
        }
    }
}
