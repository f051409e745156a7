//! What a backend can do beyond delivering: each facet a trait of its own, reached from the
//! driver ([`Driver::inspect`](super::Driver::inspect) and its siblings), so a backend
//! implements the facets it supports and no others.

use std::time::Duration;

use async_trait::async_trait;

use crate::flow::{Admission, Bound, Cancellation, PauseTarget};
use crate::inspect::{
    DeadLetter, DeadReason, Page, PageRequest, QueueState, QueueStats, Replay, found_by_pages,
    peeked_page,
};
use crate::unique::{Emitted, Unique};
use crate::workers::WorkerInfo;
use crate::{Error, Message, Priority};

use super::Delivery;

/// The figures of a backend's queues, and emptying them.
///
/// A figure the backend cannot tell is [`Figure::Unknown`](crate::inspect::Figure::Unknown); an
/// estimate is [`Figure::Approximate`](crate::inspect::Figure::Approximate); a
/// [`Figure::Exact`](crate::inspect::Figure::Exact) is checked as exact by the conformance suite.
#[async_trait]
pub trait Inspect: Send + Sync {
    /// The figures of every priority queue, highest priority first: waiting, delayed, in
    /// flight, dead, and the latency.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    async fn stats(&self) -> Result<Vec<QueueStats>, Error>;

    /// Removes every message of the queue of `priority` in `state`, and only those; returns
    /// how many, when the backend can tell. Purging messages in flight removes what the
    /// backend keeps of their claims: handlers already running them still finish, but a crash
    /// no longer brings them back.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a state the backend cannot purge alone;
    /// [`Error::UnknownPriority`]; connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may have removed some of the messages.
    async fn purge(&self, priority: Priority, state: QueueState) -> Result<Option<u64>, Error>;
}

/// Reading single messages without claiming them, and removing one by id.
#[async_trait]
pub trait Browse: Send + Sync {
    /// Up to `limit` messages of the queue of `priority` in `state`, oldest first, without
    /// claiming them: what the next `receive` gets does not change. For
    /// [`Dead`](QueueState::Dead), the messages of the dead letters that decode; their reasons
    /// come with [`DeadLetters::list`].
    ///
    /// # Errors
    /// [`Error::Unsupported`] for messages in flight on a driver without
    /// [`Capabilities::at_least_once`](super::Capabilities::at_least_once) (a taken message
    /// has left the backend); [`Error::UnknownPriority`]; connection errors.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    async fn peek(
        &self,
        priority: Priority,
        state: QueueState,
        limit: usize,
    ) -> Result<Vec<Message>, Error>;

    /// One page of the messages of the queue of `priority` in `request.state`, without
    /// claiming them: up to `request.limit` of its type, from its cursor on, in the backend's
    /// order for the state (as [`peek`](Browse::peek) reads them, or in no set order where the
    /// backend keeps none, as a Redis set). Walking from the first page through each
    /// [`Page::next`] until it is `None` meets every message that stays in the state meanwhile
    /// once. A page filtered by type may hold fewer than asked and still have a next one.
    ///
    /// The default reads the state with `peek` up to the page's end; a backend overrides it
    /// to read only the page.
    ///
    /// # Errors
    /// [`Error::InvalidCursor`] for a cursor this backend did not give; as `peek`.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    async fn page(&self, priority: Priority, request: &PageRequest) -> Result<Page, Error> {
        peeked_page(self, priority, request).await
    }

    /// The message `id` of the queue of `priority` and its state, looked for in each state in
    /// turn (waiting, delayed, in flight, dead); `None` when it is in none of them.
    ///
    /// The default walks the pages of each state; a backend overrides it to look the id up.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`]; connection errors.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    async fn find(
        &self,
        priority: Priority,
        id: &str,
    ) -> Result<Option<(QueueState, Message)>, Error> {
        found_by_pages(self, priority, id).await
    }

    /// Removes the waiting, delayed or dead message `id` of the queue of `priority`; returns
    /// whether it was there.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`]; connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have removed the message.
    async fn delete(&self, priority: Priority, id: &str) -> Result<bool, Error>;
}

/// Dead letters: messages whose handlers failed for good and bodies that could not be
/// decoded, kept with their reasons, listed and replayed.
///
/// A backend with this facet also keeps what its `receive` could not decode here, so the
/// dispatcher and operators find it beside the failed messages.
#[async_trait]
pub trait DeadLetters: Send + Sync {
    /// Moves `delivery` to the dead letters of its queue with `reason`, and acknowledges it.
    /// The backend applies its [`Retention`](crate::inspect::Retention) there, dropping the
    /// oldest. The [`Dispatcher`](crate::Dispatcher) calls it when a handler failed for good.
    ///
    /// # Errors
    /// [`Error::InvalidDelivery`] for a delivery of another driver; connection errors (the
    /// delivery then stays claimed, to be delivered again).
    ///
    /// # Cancellation safety
    /// Dropping the future never loses the message: it is kept as a dead letter, or still
    /// claimed (and delivered again), or both (on brokers where keeping and acknowledging are
    /// two requests), in which case it is handled again and may die twice.
    async fn add(&self, delivery: &Delivery, reason: &DeadReason) -> Result<(), Error>;

    /// Up to `limit` dead letters of the queue of `priority`, oldest first.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`]; connection errors.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    async fn list(&self, priority: Priority, limit: usize) -> Result<Vec<DeadLetter>, Error>;

    /// Puts the dead letters of the queue of `priority` that `replay` selects back on that
    /// queue, due now (see [`Replay`]); an undecodable one goes back as its bytes. Returns how
    /// many went back.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`]; connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may have replayed some of the selected letters and not others;
    /// none is lost. On brokers where putting back and removing from the store are two
    /// requests, one letter may be both replayed and still dead; replaying again then queues it
    /// twice.
    async fn replay(&self, priority: Priority, replay: &Replay) -> Result<u64, Error>;
}

/// Live workers: each running dispatcher announces itself, and anyone can list them.
#[async_trait]
pub trait Workers: Send + Sync {
    /// Announces `worker` as running until `ttl` from now, replacing its earlier
    /// announcement; what is stored expires then (its [`expires`](WorkerInfo::expires) is set
    /// by the backend). The [`Dispatcher`](crate::Dispatcher) renews it every third of `ttl`.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have stored the announcement.
    async fn announce(&self, worker: &WorkerInfo, ttl: Duration) -> Result<(), Error>;

    /// Removes the announcement of the worker `id`; nothing when there is none.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have removed it; it expires with its time to live.
    async fn withdraw(&self, id: &str) -> Result<(), Error>;

    /// The workers whose announcement has not expired, oldest first.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    async fn list(&self) -> Result<Vec<WorkerInfo>, Error>;
}

/// Unique emits: a message is queued unless another one holds its key, atomically on the
/// backend, across processes.
#[async_trait]
pub trait UniqueEmits: Send + Sync {
    /// Queues `message` as [`send`](super::Driver::send) does, unless another message holds
    /// the key of `unique`: then nothing is queued and the answer is [`Emitted::Duplicate`].
    /// Taking the key and queueing are one atomic step on the backend, so of any number of
    /// concurrent emits with one key, from any number of processes, exactly one is queued.
    /// The key is held by the message's id for [`Unique::window`], or until
    /// [`release`](UniqueEmits::release) gives it up. Callers check `unique` first
    /// ([`Unique::check`]); [`Emitter::emit_unique`](crate::Emitter::emit_unique) does.
    ///
    /// # Errors
    /// As [`send`](super::Driver::send).
    ///
    /// # Cancellation safety
    /// Not cancellation safe: dropped before it returns, the key may be taken and the message
    /// queued, or the key taken alone (it then expires with its window).
    async fn send_unique(
        &self,
        message: &Message,
        priority: Priority,
        unique: &Unique,
    ) -> Result<Emitted, Error>;

    /// Gives up the uniqueness key `key` if the message `holder` (an id) still holds it;
    /// nothing otherwise (the key expired, or another message took it since). The dispatcher
    /// calls it when a message with a [`unique_key`](Message::unique_key) is done.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have given the key up; it expires with its window.
    async fn release(&self, key: &str, holder: &str) -> Result<(), Error>;
}

/// The shared state of [limits](crate::flow::Limits): slots of concurrency limits and starts of
/// rates, kept by the backend so every worker on it counts against the same figures. What is
/// kept for a name expires once the name is idle (its slots' leases and its rate's period
/// over), so millions of distinct names over time do not grow the backend.
///
/// A backend without a store of its own (a broker) takes one from another backend: see
/// [`WithStore`](super::WithStore).
#[async_trait]
pub trait LimitStore: Send + Sync {
    /// Admits `holder` under every bound of `bounds`, or under none, in one atomic step: when
    /// each has room, takes a slot of each [`Bound::Slots`] for `lease` and records a start
    /// in each [`Bound::Starts`]; otherwise takes nothing and names the first full bound.
    ///
    /// # Errors
    /// Connection errors; nothing is taken then.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have admitted the holder; slots taken then expire
    /// with `lease`, and a start recorded counts against its rate.
    async fn admit(
        &self,
        holder: &str,
        bounds: &[Bound],
        lease: Duration,
    ) -> Result<Admission, Error>;

    /// Records up to `want` starts of `holder` under every rate of `bounds` (rates alone), or
    /// none, in one atomic step, for runs that all begin within `within` of the call. Returns
    /// the admission and how many starts it recorded: as many as every rate has ample room for,
    /// up to `want`, and at least one when each has room for one; none when refused.
    ///
    /// When more than one is recorded, the backend must count each as made at the end of
    /// `within` (on its clock, from when it ran the step), so that however the holder spreads
    /// them over that time, no window of a rate's period holds more starts than it allows.
    /// The starts are recorded under names of the holder's (`<holder>#<n>`, say), as
    /// [`usage`](Self::usage) counts them.
    ///
    /// The default records one start through [`admit`](Self::admit): correct on any store, one
    /// call per start.
    ///
    /// # Errors
    /// Connection errors; nothing is recorded then.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have recorded the starts; those recorded count
    /// against their rates.
    async fn admit_starts(
        &self,
        holder: &str,
        bounds: &[Bound],
        want: u32,
        within: Duration,
    ) -> Result<(Admission, u32), Error> {
        let _ = want;
        let admission = self.admit(holder, bounds, within).await?;
        let recorded = u32::from(admission == Admission::Admitted);
        Ok((admission, recorded))
    }

    /// Keeps the slots `holder` still holds of the bounds called `names` for `lease` from now;
    /// returns whether it held every one of them (a slot whose lease ended, or that was given
    /// up, is not taken again: its holder must not count on it).
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have renewed them.
    async fn renew(&self, holder: &str, names: &[String], lease: Duration) -> Result<bool, Error>;

    /// Gives up the slots `holder` holds of the bounds called `names`; nothing for those it
    /// does not hold.
    ///
    /// # Errors
    /// Connection errors; the slots then expire with their lease.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have given them up.
    async fn release(&self, holder: &str, names: &[String]) -> Result<(), Error>;

    /// How much of `bound` is in use now: slots held (leases not over) or starts within the
    /// period.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing the figure depends on.
    async fn usage(&self, bound: &Bound) -> Result<u32, Error>;
}

/// Pausing and cancelling from outside the workers: state kept by the backend, read by every
/// worker within a second, surviving their restarts.
#[async_trait]
pub trait Controls: Send + Sync {
    /// Pauses `target`: within a second no worker starts a message it covers; those running
    /// finish. Pausing what is paused does nothing.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have paused it.
    async fn pause(&self, target: &PauseTarget) -> Result<(), Error>;

    /// Resumes `target`; returns whether it was paused.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have resumed it.
    async fn resume(&self, target: &PauseTarget) -> Result<bool, Error>;

    /// What is paused, in the order of [`PauseTarget`].
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    async fn paused(&self) -> Result<Vec<PauseTarget>, Error>;

    /// Records `cancellation`, kept for [`CANCELLATIONS_KEPT`](crate::flow::CANCELLATIONS_KEPT)
    /// (older ones are dropped). A second request for one id replaces the first.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have recorded it.
    async fn cancel(&self, cancellation: &Cancellation) -> Result<(), Error>;

    /// The cancellations recorded at or after `since` (Unix seconds, as their
    /// [`at`](Cancellation::at)), oldest first, at most
    /// [`CANCELLATIONS_PAGE`](crate::flow::CANCELLATIONS_PAGE) of them.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    async fn cancellations(&self, since: f64) -> Result<Vec<Cancellation>, Error>;
}

/// Counters kept in named buckets for a bounded time: what the workers did, per minute and per
/// hour, for the dashboard's history ([`history`](crate::history)). Every process adding to a
/// bucket adds to the same counters.
#[async_trait]
pub trait Counters: Send + Sync {
    /// Adds each count of `counts` to the counter of its name in `bucket` (a missing counter
    /// starts at 0). The backend keeps the bucket at least `keep` after this call and drops it
    /// some time after that.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may have added some of the counts, or all, or none.
    async fn add(
        &self,
        bucket: &str,
        counts: &[(String, u64)],
        keep: Duration,
    ) -> Result<(), Error>;

    /// The counters of each of `buckets` that holds any, in the order asked; a bucket that
    /// was never added to, or was dropped, is left out.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    async fn read(&self, buckets: &[String]) -> Result<Vec<(String, Vec<(String, u64)>)>, Error>;
}
