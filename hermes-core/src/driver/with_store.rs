//! A driver whose flow-control state lives on another backend.

use std::fmt;
use std::sync::Arc;

use super::{
    Browse, Controls, DeadLetters, Driver, Inspect, JobStore, LimitStore, UniqueEmits, Workers,
};
use crate::forward;

/// A driver that delivers through `D` and keeps its [limits](crate::flow::Limits), pauses and
/// cancellations on another backend, for brokers that have nowhere to keep them (RabbitMQ,
/// SQS): every worker of the queue must then use the same store. Every other facet is `D`'s.
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
    inner: D,
    store: Arc<dyn Driver>,
}

impl<D: Driver> WithStore<D> {
    /// `inner`, with the limit store and the controls of `store`.
    pub fn new(inner: D, store: impl Driver) -> Self {
        WithStore::from_arc(inner, Arc::new(store))
    }

    /// `inner`, with the limit store and the controls of a shared `store`.
    pub fn from_arc(inner: D, store: Arc<dyn Driver>) -> Self {
        WithStore { inner, store }
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

    fn controls(&self) -> Option<&dyn Controls> {
        self.store.controls()
    }

    /// The inner driver's: a group's callbacks and steps are queued atomically with marking
    /// them sent, which a store on another backend cannot do for a broker's queue.
    fn jobs(&self) -> Option<&dyn JobStore> {
        self.inner.jobs()
    }
}
