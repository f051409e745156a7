//! The facet that keeps what became of jobs and groups of jobs.

use std::time::Duration;

use async_trait::async_trait;

use crate::tracking::{
    GroupPage, GroupRequest, GroupSpec, GroupState, JobRecord, RecordPage, RecordRequest, Settled,
    Tally,
};
use crate::{Error, Message, Priority};

/// One settle of [`JobStore::settle_many`]: the arguments of [`JobStore::settle`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Settle<'a> {
    /// The group.
    pub group: &'a str,
    /// The member settled.
    pub member: &'a str,
    /// How it ended.
    pub outcome: &'a Settled,
    /// The record stored with it, and how long it is kept.
    pub record: Option<(&'a JobRecord, Duration)>,
}

impl<'a> Settle<'a> {
    /// A settle of `member` of `group` as `outcome`, storing `record`.
    pub fn new(
        group: &'a str,
        member: &'a str,
        outcome: &'a Settled,
        record: Option<(&'a JobRecord, Duration)>,
    ) -> Self {
        Settle {
            group,
            member,
            outcome,
            record,
        }
    }
}

/// Marks `name` in the names `released` (`mark`), or clears it (`!mark`), for a backend that
/// keeps a group's release marks as a list; returns whether the list changed, as
/// [`JobStore::mark`] answers.
pub fn mark_in(released: &mut Vec<String>, name: &str, mark: bool) -> bool {
    let marked = released.iter().any(|n| n == name);
    if marked == mark {
        return false;
    }
    if mark {
        released.push(name.to_owned());
        released.sort();
    } else {
        released.retain(|n| n != name);
    }
    true
}

/// The first character of a mark a backend or [`WithStore`](super::WithStore) keeps among a
/// group's release marks for its own bookkeeping (a step or callback name never holds it);
/// [`GroupState::new`] leaves such marks out.
pub const INTERNAL_MARK: char = ':';

/// The mark of the claim of `copy` on the run of `name` ([`JobStore::claim_run`]), for a
/// backend that keeps claims among a group's release marks; [`claimant_in`] finds it.
pub fn claim_mark(name: &str, copy: &str) -> String {
    format!("{INTERNAL_MARK}run:{name}={copy}")
}

/// The copy that claimed the run of `name` in the marks `released`, if one did.
pub fn claimant_in<'a>(released: &'a [String], name: &str) -> Option<&'a str> {
    let prefix = format!("{INTERNAL_MARK}run:{name}=");
    released.iter().find_map(|mark| mark.strip_prefix(&prefix))
}

/// How long an unfinished group is kept after its last change: 30 days. A group whose
/// members were lost (purged, say) goes then.
pub const UNFINISHED_GROUP_KEPT: Duration = Duration::from_secs(30 * 24 * 3600);

/// What became of jobs, by id ([`JobRecord`]), and the state of batches and workflows:
/// groups whose members are each settled once, and which release each of their messages
/// once, across every worker and through their crashes.
///
/// The [`Dispatcher`](crate::Dispatcher) writes it; [`Emitter`](crate::Emitter) reads it
/// ([`Emitter::status`](crate::Emitter::status)) and opens groups. The logic of batches and
/// workflows is the dispatcher's; a backend keeps these few facts and makes
/// [`settle`](Self::settle) and [`release`](Self::release) atomic.
///
/// A backend without a store of its own (a broker) takes one from another backend: see
/// [`WithStore`](super::WithStore).
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Stores `record` under its id, replacing what was there, kept for `keep` from now.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have stored it.
    async fn put(&self, record: &JobRecord, keep: Duration) -> Result<(), Error>;

    /// The record of the job `id`; `None` when there is none (never kept, or expired).
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    async fn get(&self, id: &str) -> Result<Option<JobRecord>, Error>;

    /// The records kept, a page at a time, those that expire last first (under one retention
    /// window: the last stored first), of the states, priority and type `request` names.
    /// Reads at most [`RecordRequest::reads`] records for a page, so a page with filters may
    /// hold fewer than asked (or none) and still name a next one. Walking the pages meets
    /// every record kept throughout the walk once; a record stored again meanwhile may be met
    /// again, or not.
    ///
    /// # Errors
    /// Connection errors; [`Error::InvalidMessage`] for a cursor this backend did not give.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    async fn records(&self, request: &RecordRequest) -> Result<RecordPage, Error>;

    /// Creates the group `spec` with `members` pending; its state is kept for `keep` once its
    /// last member is settled ([`UNFINISHED_GROUP_KEPT`] after its last change until then).
    /// Opening a group that exists changes nothing (a retried open).
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have created it.
    async fn open(&self, spec: &GroupSpec, members: &[String], keep: Duration)
    -> Result<(), Error>;

    /// Adds `members` to the group `group`, pending; a member it has already is not added
    /// twice.
    ///
    /// # Errors
    /// [`Error::Group`] when there is no such group, or every member of it is settled (it is
    /// finished: nothing more can join); connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have added them.
    async fn join(&self, group: &str, members: &[String]) -> Result<(), Error>;

    /// Settles the member `member` of `group` as `outcome`, once: in one atomic step, counts
    /// it in the group's [`Tally`] unless it was settled already (then nothing changes), keeps
    /// the outcome, and stores `record` as [`put`](Self::put) does. Returns the tally after it,
    /// and whether this call settled the member; `None` when there is no such group. A name
    /// that is not a member is not counted (nor kept), and `false` comes back.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have settled it; settling again is harmless.
    async fn settle(
        &self,
        group: &str,
        member: &str,
        outcome: &Settled,
        record: Option<(&JobRecord, Duration)>,
    ) -> Result<Option<(Tally, bool)>, Error>;

    /// Settles each of `settles` as [`settle`](Self::settle) does, in order, and answers in
    /// the same order. A dispatcher gathers the settles of runs that end together into one
    /// call; a backend that can settle many in one request does so. The default settles them
    /// one by one.
    ///
    /// # Errors
    /// Connection errors; some of the settles may have been made then (settling again is
    /// harmless).
    ///
    /// # Cancellation safety
    /// Dropping the future may have made some of the settles.
    async fn settle_many(
        &self,
        settles: &[Settle<'_>],
    ) -> Result<Vec<Option<(Tally, bool)>>, Error> {
        let mut answers = Vec::with_capacity(settles.len());
        for s in settles {
            answers.push(self.settle(s.group, s.member, s.outcome, s.record).await?);
        }
        Ok(answers)
    }

    /// Queues `message` on `priority` as [`send`](super::Driver::send) does, unless `group`
    /// released `name` already, in one atomic step: of any number of calls for one name, from
    /// any number of workers, exactly one queues its message. Returns whether this call did.
    ///
    /// # Errors
    /// As [`send`](super::Driver::send); [`Error::Group`] when there is no such group.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have released it; releasing again is harmless.
    async fn release(
        &self,
        group: &str,
        name: &str,
        message: &Message,
        priority: Priority,
    ) -> Result<bool, Error>;

    /// Marks `name` of `group` released (`released`), or not released (`!released`),
    /// without queueing anything: for a queue on another backend than the store (see
    /// [`WithStore`](super::WithStore)), which then sends the message itself. Returns whether
    /// this call changed the mark (`false` too when there is no such group). Of any number of
    /// calls marking one name, from any number of workers, exactly one gets `true`.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have changed the mark.
    async fn mark(&self, group: &str, name: &str, released: bool) -> Result<bool, Error>;

    /// Claims the run of the message `name` that `group` released for one copy of it,
    /// `copy`: the first copy to claim keeps the run for good. Returns whether `copy` holds
    /// it: `true` again for the same copy (a retry, or a delivery again after its worker
    /// died), and `true` when there is no such group (nothing to tell copies apart by).
    ///
    /// A message can be queued twice: a worker killed after queueing it and before marking it
    /// released, or, on a broker, a worker that published it and died before confirming it.
    /// The dispatcher acknowledges a copy that does not hold the run without running it, so
    /// the message runs once. A copy is told by its creation time
    /// ([`Message::created`](crate::Message::created)), which every retry keeps.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Dropping the future may or may not have claimed the run; claiming again with the same
    /// copy is harmless.
    async fn claim_run(&self, group: &str, name: &str, copy: &str) -> Result<bool, Error>;

    /// The group `group` now; `None` when there is none (never opened, or expired).
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    async fn group(&self, group: &str) -> Result<Option<GroupState>, Error>;

    /// The batches and workflows kept, a page at a time, the last created first (then by id,
    /// last first). Walking the pages meets every group kept throughout the walk once.
    ///
    /// # Errors
    /// Connection errors; [`Error::InvalidMessage`] for a cursor this backend did not give.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing a reader sees (a backend may drop what it lists of
    /// groups that expired).
    async fn groups(&self, request: &GroupRequest) -> Result<GroupPage, Error>;

    /// The outcomes of the members `members` of `group`, in that order: `None` for one not
    /// settled (or not a member).
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancellation safety
    /// Cancel safe: it changes nothing.
    async fn outcomes(
        &self,
        group: &str,
        members: &[String],
    ) -> Result<Vec<Option<Settled>>, Error>;
}
