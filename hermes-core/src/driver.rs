//! The contract between Hermes and a queue backend.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::{
    DeadLetter, DeadReason, Emitted, Error, Message, QueueState, QueueStats, Replay, Unique,
    WorkerInfo,
};

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
/// The trait is object safe and implemented for `Arc<D>` and `Box<D>`, so `Arc<dyn Driver>`
/// works wherever a driver does.
#[async_trait]
pub trait Driver: fmt::Debug + Send + Sync + 'static {
    /// A short name for logs, such as `"redis"` or `"filesystem"`.
    fn name(&self) -> &'static str;

    /// What this driver guarantees.
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
    async fn ack(&self, delivery: &Delivery) -> Result<(), Error>;

    /// Gives `delivery` back for redelivery now, as if it had never been claimed.
    async fn nack(&self, delivery: &Delivery) -> Result<(), Error>;

    /// Keeps `delivery` claimed for `by` more from now, so a slow handler is not run twice.
    /// Drivers without [`Capabilities::extend`] return `Ok` and do nothing.
    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        let _ = (delivery, by);
        Ok(())
    }

    /// Finishes what the driver holds for this process: gives back messages it claimed ahead
    /// (prefetched) but did not hand out. The [`Dispatcher`](crate::Dispatcher) calls it when
    /// `handle` returns. Drivers without such state do nothing.
    async fn flush(&self) -> Result<(), Error> {
        Ok(())
    }

    /// The figures of every priority queue, highest priority first: waiting, delayed, in
    /// flight, dead, and the latency. A figure the backend cannot tell is
    /// [`Figure::Unknown`](crate::Figure::Unknown); an estimate is
    /// [`Figure::Approximate`](crate::Figure::Approximate).
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::stats`]; connection errors.
    async fn stats(&self) -> Result<Vec<QueueStats>, Error> {
        Err(self.unsupported("stats"))
    }

    /// Up to `limit` messages of the queue of `priority` in `state`, oldest first, without
    /// claiming them: what the next `receive` gets does not change. For
    /// [`Dead`](QueueState::Dead), the messages of the dead letters that decode; their reasons
    /// come with [`dead_letters`](Driver::dead_letters).
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::peek`], or for messages in flight on a
    /// driver without [`Capabilities::at_least_once`] (a taken message has left the backend);
    /// [`Error::UnknownPriority`].
    async fn peek(
        &self,
        priority: Priority,
        state: QueueState,
        limit: usize,
    ) -> Result<Vec<Message>, Error> {
        let _ = (priority, state, limit);
        Err(self.unsupported("peek"))
    }

    /// Up to `limit` dead letters of the queue of `priority`, oldest first.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::dead_letters`]; [`Error::UnknownPriority`].
    async fn dead_letters(
        &self,
        priority: Priority,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, Error> {
        let _ = (priority, limit);
        Err(self.unsupported("dead letters"))
    }

    /// Moves `delivery` to the dead letters of its queue with `reason`, and acknowledges it.
    /// The driver applies its [`Retention`](crate::Retention) there, dropping the oldest.
    /// The [`Dispatcher`](crate::Dispatcher) calls it when a handler failed for good.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::dead_letters`]; connection errors (the
    /// delivery then stays claimed, to be delivered again).
    ///
    /// # Cancellation safety
    /// Dropping the future never loses the message: it is kept as a dead letter, or still
    /// claimed (and delivered again), or both (on brokers where keeping and acknowledging are
    /// two requests), in which case it is handled again and may die twice.
    async fn dead_letter(&self, delivery: &Delivery, reason: &DeadReason) -> Result<(), Error> {
        let _ = (delivery, reason);
        Err(self.unsupported("dead letters"))
    }

    /// Puts the dead letters of the queue of `priority` that `replay` selects back on that
    /// queue, due now (see [`Replay`]); an undecodable one goes back as its bytes. Returns how
    /// many went back.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::dead_letters`]; [`Error::UnknownPriority`].
    ///
    /// # Cancellation safety
    /// Dropping the future may have replayed some of the selected letters and not others;
    /// none is lost. On brokers where putting back and removing from the store are two
    /// requests, one letter may be both replayed and still dead; replaying again then queues it
    /// twice.
    async fn replay(&self, priority: Priority, replay: &Replay) -> Result<u64, Error> {
        let _ = (priority, replay);
        Err(self.unsupported("replay"))
    }

    /// Removes every message of the queue of `priority` in `state`, and only those; returns
    /// how many, when the backend can tell. Purging messages in flight removes what the
    /// backend keeps of their claims: handlers already running them still finish, but a crash
    /// no longer brings them back.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::purge`] (or for a state the backend cannot
    /// purge alone); [`Error::UnknownPriority`].
    async fn purge(&self, priority: Priority, state: QueueState) -> Result<Option<u64>, Error> {
        let _ = (priority, state);
        Err(self.unsupported("purge"))
    }

    /// Removes the waiting, delayed or dead message `id` of the queue of `priority`; returns
    /// whether it was there.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::delete`]; [`Error::UnknownPriority`].
    async fn delete(&self, priority: Priority, id: &str) -> Result<bool, Error> {
        let _ = (priority, id);
        Err(self.unsupported("delete"))
    }

    /// Announces `worker` as running until `ttl` from now (its
    /// [`expires`](WorkerInfo::expires)), replacing its earlier announcement. The
    /// [`Dispatcher`](crate::Dispatcher) renews it every third of `ttl` while it runs.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::workers`]; connection errors.
    async fn announce(&self, worker: &WorkerInfo, ttl: Duration) -> Result<(), Error> {
        let _ = (worker, ttl);
        Err(self.unsupported("live workers"))
    }

    /// Removes the announcement of the worker `id`; nothing when there is none.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::workers`]; connection errors.
    async fn withdraw(&self, id: &str) -> Result<(), Error> {
        let _ = id;
        Err(self.unsupported("live workers"))
    }

    /// The workers whose announcement has not expired, oldest first.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::workers`]; connection errors.
    async fn workers(&self) -> Result<Vec<WorkerInfo>, Error> {
        Err(self.unsupported("live workers"))
    }

    /// Queues `message` as [`send`](Driver::send) does, unless another message holds the key
    /// of `unique`: then nothing is queued and the answer is [`Emitted::Duplicate`]. Taking
    /// the key and queueing are one atomic step on the backend, so of any number of
    /// concurrent emits with one key, from any number of processes, exactly one is queued.
    /// The key is held by the message's id for [`Unique::window`], or until
    /// [`release_unique`](Driver::release_unique) gives it up. Callers check `unique` first
    /// ([`Unique::check`]); [`Emitter::emit_unique`](crate::Emitter::emit_unique) does.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::unique`]; as [`send`](Driver::send).
    ///
    /// # Cancellation safety
    /// Not cancellation safe: dropped before it returns, the key may be taken and the message
    /// queued, or the key taken alone (it then expires with its window).
    async fn send_unique(
        &self,
        message: &Message,
        priority: Priority,
        unique: &Unique,
    ) -> Result<Emitted, Error> {
        let _ = (message, priority, unique);
        Err(self.unsupported("unique jobs"))
    }

    /// Gives up the uniqueness key `key` if the message `holder` (an id) still holds it;
    /// nothing otherwise (the key expired, or another message took it since). The dispatcher
    /// calls it when a message with a [`unique_key`](Message::unique_key) is done.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without [`Capabilities::unique`]; connection errors.
    async fn release_unique(&self, key: &str, holder: &str) -> Result<(), Error> {
        let _ = (key, holder);
        Err(self.unsupported("unique jobs"))
    }
}

/// Helpers for drivers.
trait UnsupportedExt {
    fn unsupported(&self, what: &'static str) -> Error;
}

impl<D: Driver + ?Sized> UnsupportedExt for D {
    fn unsupported(&self, what: &'static str) -> Error {
        Error::Unsupported {
            driver: self.name(),
            what,
        }
    }
}

/// What a driver guarantees. The conformance suite runs the scenarios of every declared
/// capability and skips the others.
///
/// Build one from [`Capabilities::default`] (nothing declared) and set the fields.
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
    /// [`Driver::stats`] reports the queues' figures.
    pub stats: bool,
    /// [`Driver::stats`] gives exact counts of waiting, delayed, in-flight and dead messages
    /// (without it, counts it gives may be approximate, as SQS's are).
    pub exact_stats: bool,
    /// [`Driver::peek`] lists messages without claiming them.
    pub peek: bool,
    /// [`Driver::purge`] empties one state of a queue.
    pub purge: bool,
    /// [`Driver::delete`] removes one message by id.
    pub delete: bool,
    /// [`Driver::dead_letter`], [`Driver::dead_letters`] and [`Driver::replay`] keep, list and
    /// replay failed and undecodable messages.
    pub dead_letters: bool,
    /// [`Driver::announce`], [`Driver::withdraw`] and [`Driver::workers`] keep and list live
    /// workers.
    pub workers: bool,
    /// [`Driver::send_unique`] and [`Driver::release_unique`]: unique jobs, atomic on the
    /// backend.
    pub unique: bool,
}

impl Capabilities {
    /// The same, without any inspection, dead-letter or live-worker capability (`stats`,
    /// `exact_stats`, `peek`, `purge`, `delete`, `dead_letters`, `workers`): for a driver that
    /// only delivers.
    #[must_use]
    pub fn without_inspection(self) -> Self {
        Capabilities {
            stats: false,
            exact_stats: false,
            peek: false,
            purge: false,
            delete: false,
            dead_letters: false,
            workers: false,
            ..self
        }
    }

    /// Every capability, no payload limit.
    pub fn all() -> Self {
        Capabilities {
            delay: true,
            priorities: true,
            fifo: true,
            at_least_once: true,
            extend: true,
            max_payload: None,
            stats: true,
            exact_stats: true,
            peek: true,
            purge: true,
            delete: true,
            dead_letters: true,
            workers: true,
            unique: true,
        }
    }
}

/// A claimed message, handed out by [`Driver::receive`] and given back to
/// [`Driver::ack`] or [`Driver::nack`] of the same driver.
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
    /// [extended](Driver::extend) within that time, the backend delivers the message again. The
    /// [`Dispatcher`](crate::Dispatcher) extends the claim of a running handler's message by
    /// `lease` every `lease / 2`, on drivers with [`Capabilities::extend`].
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
    /// use hermes_core::Receipt;
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

/// The future of a driver call, as `async_trait` boxes it.
type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// A call of `delegate_driver` that hands back the inner driver's boxed future as it is: the
/// signature `async_trait` gives a method of one borrowed argument and the others by value.
macro_rules! forward {
    ($name:ident($first:ident: &$borrowed:ty $(, $rest:ident: $by_value:ty)*) -> $output:ty) => {
        fn $name<'life0, 'life1, 'async_trait>(
            &'life0 self,
            $first: &'life1 $borrowed,
            $($rest: $by_value),*
        ) -> BoxFuture<'async_trait, $output>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            Self: 'async_trait,
        {
            (**self).$name($first $(, $rest)*)
        }
    };
}

/// `Driver` for `Arc<D>` and `Box<D>`. The calls on the hot path (send, receive, ack and the
/// like) hand back the inner driver's boxed future as it is, rather than boxing it again.
macro_rules! delegate_driver {
    ($($wrapper:ident),*) => {$(
        #[async_trait]
        impl<D: Driver + ?Sized> Driver for $wrapper<D> {
            fn name(&self) -> &'static str {
                (**self).name()
            }
            fn capabilities(&self) -> Capabilities {
                (**self).capabilities()
            }
            fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
                (**self).setup_priority_queue(name, priority)
            }
            forward!(send(message: &Message, priority: Priority) -> Result<(), Error>);
            forward!(send_batch(messages: &[Message], priority: Priority) -> Result<(), Error>);
            forward!(
                receive(priorities: &[Priority], wait: Duration) -> Result<Option<Delivery>, Error>
            );
            forward!(ack(delivery: &Delivery) -> Result<(), Error>);
            forward!(nack(delivery: &Delivery) -> Result<(), Error>);
            forward!(extend(delivery: &Delivery, by: Duration) -> Result<(), Error>);
            async fn flush(&self) -> Result<(), Error> {
                (**self).flush().await
            }
            async fn stats(&self) -> Result<Vec<QueueStats>, Error> {
                (**self).stats().await
            }
            async fn peek(
                &self,
                priority: Priority,
                state: QueueState,
                limit: usize,
            ) -> Result<Vec<Message>, Error> {
                (**self).peek(priority, state, limit).await
            }
            async fn dead_letters(
                &self,
                priority: Priority,
                limit: usize,
            ) -> Result<Vec<DeadLetter>, Error> {
                (**self).dead_letters(priority, limit).await
            }
            async fn dead_letter(
                &self,
                delivery: &Delivery,
                reason: &DeadReason,
            ) -> Result<(), Error> {
                (**self).dead_letter(delivery, reason).await
            }
            async fn replay(&self, priority: Priority, replay: &Replay) -> Result<u64, Error> {
                (**self).replay(priority, replay).await
            }
            async fn purge(
                &self,
                priority: Priority,
                state: QueueState,
            ) -> Result<Option<u64>, Error> {
                (**self).purge(priority, state).await
            }
            async fn delete(&self, priority: Priority, id: &str) -> Result<bool, Error> {
                (**self).delete(priority, id).await
            }
            async fn announce(&self, worker: &WorkerInfo, ttl: Duration) -> Result<(), Error> {
                (**self).announce(worker, ttl).await
            }
            async fn withdraw(&self, id: &str) -> Result<(), Error> {
                (**self).withdraw(id).await
            }
            async fn workers(&self) -> Result<Vec<WorkerInfo>, Error> {
                (**self).workers().await
            }
            async fn send_unique(
                &self,
                message: &Message,
                priority: Priority,
                unique: &Unique,
            ) -> Result<Emitted, Error> {
                (**self).send_unique(message, priority, unique).await
            }
            async fn release_unique(&self, key: &str, holder: &str) -> Result<(), Error> {
                (**self).release_unique(key, holder).await
            }
        }
    )*};
}

delegate_driver!(Arc, Box);

/// Checks a queue name: letters, digits, `.`, `_` and `-`, not empty, not starting with `.`,
/// at most 200 bytes.
///
/// # Errors
/// [`Error::InvalidQueueName`] saying what is wrong.
pub fn validate_queue_name(name: &str) -> Result<(), Error> {
    let reason = if name.is_empty() {
        Some("a queue name must not be empty")
    } else if name.starts_with('.') {
        Some("a queue name must not start with '.'")
    } else if name.len() > 200 {
        Some("a queue name must not be longer than 200 bytes")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        Some("a queue name may contain only letters, digits, '.', '_' and '-'")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidQueueName {
            name: crate::error::excerpt(name),
            reason,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names() {
        for ok in ["hermes", "a.b_c-D9", "x"] {
            assert!(validate_queue_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".hidden",
            "..",
            "a/b",
            "a\0b",
            "a b",
            "é",
            &"x".repeat(201),
        ] {
            let err = validate_queue_name(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidQueueName { .. }), "{bad:?}");
        }
    }

    #[test]
    fn a_long_name_is_cut_in_the_error() {
        let err = validate_queue_name(&"n".repeat(10_000))
            .unwrap_err()
            .to_string();
        assert!(err.len() < 300, "{} bytes: {err}", err.len());
        assert!(err.contains("10000 bytes"), "{err}");
    }
}
