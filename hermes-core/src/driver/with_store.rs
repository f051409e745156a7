//! A driver whose flow-control state lives on another backend.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::{
    Browse, Controls, Counters, DeadLetters, Driver, INTERNAL_MARK, Inspect, JobStore, LimitStore,
    UniqueEmits, Workers,
};
use crate::forward;
use crate::tracking::{
    GroupPage, GroupRequest, GroupSpec, GroupState, JobRecord, RecordPage, RecordRequest, Settled,
    Tally,
};
use crate::{Error, Message, Priority};

/// A driver that delivers through `D` and keeps its [limits](crate::flow::Limits), pauses,
/// cancellations, job records, batches and workflows on another backend, for brokers that have
/// nowhere to keep them (RabbitMQ, SQS): every worker of the queue must then use the same
/// store. Every other facet is `D`'s.
///
/// A batch's callbacks and a workflow's steps are then marked sent in the store and published
/// on the broker: two steps, not one. A failed publish clears the mark, so the next worker to
/// settle a member sends it; a worker killed between the two loses that one message (the store
/// says it was sent). On a backend that keeps both, the two are one atomic step.
///
/// ```
/// use hermes_core::driver::{Driver, WithStore};
/// use hermes_testkit::MemoryDriver;
///
/// // A broker driver would go first; any backend with the facets goes second.
/// let driver = WithStore::new(MemoryDriver::new(), MemoryDriver::new());
/// assert!(driver.limits().is_some() && driver.controls().is_some());
/// ```
pub struct WithStore<D> {
    inner: Arc<D>,
    store: Arc<dyn Driver>,
    jobs: BrokerJobs<D>,
}

/// The [`JobStore`] of a [`WithStore`]: the store's, releasing on the broker.
struct BrokerJobs<D> {
    inner: Arc<D>,
    store: Arc<dyn Driver>,
}

impl<D: Driver> WithStore<D> {
    /// `inner`, with the limit store, the controls and the job store (records, batches,
    /// workflows) of `store`.
    pub fn new(inner: D, store: impl Driver) -> Self {
        WithStore::from_arc(inner, Arc::new(store))
    }

    /// `inner`, with the limit store, the controls and the job store of a shared `store`.
    pub fn from_arc(inner: D, store: Arc<dyn Driver>) -> Self {
        let inner = Arc::new(inner);
        let jobs = BrokerJobs {
            inner: inner.clone(),
            store: store.clone(),
        };
        WithStore { inner, store, jobs }
    }

    /// The driver that delivers.
    pub fn inner(&self) -> &D {
        &self.inner
    }
}

impl<D: fmt::Debug> fmt::Debug for WithStore<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithStore")
            .field("inner", &self.inner)
            .field("store", &self.store.name())
            .finish()
    }
}

#[async_trait::async_trait]
impl<D: Driver> Driver for WithStore<D> {
    forward!(inner => name, capabilities, setup_priority_queue, send, send_batch, receive, ack,
        nack, extend, flush);

    fn inspect(&self) -> Option<&dyn Inspect> {
        self.inner.inspect()
    }

    fn browse(&self) -> Option<&dyn Browse> {
        self.inner.browse()
    }

    fn dead_letters(&self) -> Option<&dyn DeadLetters> {
        self.inner.dead_letters()
    }

    fn workers(&self) -> Option<&dyn Workers> {
        self.inner.workers()
    }

    fn unique(&self) -> Option<&dyn UniqueEmits> {
        self.inner.unique()
    }

    fn limits(&self) -> Option<&dyn LimitStore> {
        self.store.limits()
    }

    fn counters(&self) -> Option<&dyn Counters> {
        self.store.counters()
    }

    fn controls(&self) -> Option<&dyn Controls> {
        self.store.controls()
    }

    fn jobs(&self) -> Option<&dyn JobStore> {
        self.store.jobs()?;
        Some(&self.jobs)
    }
}

impl<D: Driver> BrokerJobs<D> {
    fn store(&self) -> Result<&dyn JobStore, Error> {
        self.store.jobs().ok_or(Error::Unsupported {
            driver: "store",
            what: "results, batches and workflows (the jobs facet)",
        })
    }
}

#[async_trait::async_trait]
impl<D: Driver> JobStore for BrokerJobs<D> {
    async fn put(&self, record: &JobRecord, keep: Duration) -> Result<(), Error> {
        self.store()?.put(record, keep).await
    }

    async fn get(&self, id: &str) -> Result<Option<JobRecord>, Error> {
        self.store()?.get(id).await
    }

    async fn records(&self, request: &RecordRequest) -> Result<RecordPage, Error> {
        self.store()?.records(request).await
    }

    async fn open(
        &self,
        spec: &GroupSpec,
        members: &[String],
        keep: Duration,
    ) -> Result<(), Error> {
        self.store()?.open(spec, members, keep).await
    }

    async fn join(&self, group: &str, members: &[String]) -> Result<(), Error> {
        self.store()?.join(group, members).await
    }

    async fn settle(
        &self,
        group: &str,
        member: &str,
        outcome: &Settled,
        record: Option<(&JobRecord, Duration)>,
    ) -> Result<Option<(Tally, bool)>, Error> {
        self.store()?.settle(group, member, outcome, record).await
    }

    /// Marks `name` as being sent in the store, publishes `message` on the broker, then marks
    /// `name` released. A call that finds it marked as being sent and not released (a worker
    /// killed between publishing and confirming, or one still at it) publishes it again: of
    /// two copies, one runs ([`claim_run`](JobStore::claim_run)). Nothing is lost to a worker
    /// killed half way: the job that released the message is not acknowledged yet, comes back
    /// and releases again.
    async fn release(
        &self,
        group: &str,
        name: &str,
        message: &Message,
        priority: Priority,
    ) -> Result<bool, Error> {
        let store = self.store()?;
        let sending = format!("{INTERNAL_MARK}sending:{name}");
        if !store.mark(group, &sending, true).await? {
            let Some(state) = store.group(group).await? else {
                return Err(Error::Group(format!("there is no group {group}")));
            };
            if state.released.iter().any(|n| n == name) {
                return Ok(false);
            }
        }
        self.inner.send(message, priority).await?;
        store.mark(group, name, true).await?;
        Ok(true)
    }

    async fn claim_run(&self, group: &str, name: &str, copy: &str) -> Result<bool, Error> {
        self.store()?.claim_run(group, name, copy).await
    }

    async fn mark(&self, group: &str, name: &str, released: bool) -> Result<bool, Error> {
        self.store()?.mark(group, name, released).await
    }

    async fn group(&self, group: &str) -> Result<Option<GroupState>, Error> {
        self.store()?.group(group).await
    }

    async fn groups(&self, request: &GroupRequest) -> Result<GroupPage, Error> {
        self.store()?.groups(request).await
    }

    async fn outcomes(
        &self,
        group: &str,
        members: &[String],
    ) -> Result<Vec<Option<Settled>>, Error> {
        self.store()?.outcomes(group, members).await
    }
}
