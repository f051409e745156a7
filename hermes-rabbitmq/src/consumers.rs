//! The consumers of a session: one per consumed queue (each selected priority queue and its
//! long-delay queue), started on first use, each with a task that files its deliveries.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use hermes_core::{Error, Priority};
use lapin::Consumer;
use lapin::options::{BasicCancelOptions, BasicConsumeOptions};
use lapin::types::FieldTable;

use crate::driver::{Inner, RabbitMqDriver};
use crate::error::lapin_error;
use crate::naming::long_delay_queue;
use crate::session::{Session, bounded};

/// How long `flush` waits for a cancelled consumer's last deliveries.
const FORWARDER_END: Duration = Duration::from_secs(5);

/// A running consumer: its tag, and the task moving its deliveries into the buffer.
#[derive(Debug)]
pub(crate) struct Consuming {
    tag: String,
    forwarder: tokio::task::JoinHandle<()>,
}

/// A consumed queue: a priority queue, or its long-delay queue.
#[derive(Debug, Clone)]
pub(crate) struct Consumed {
    pub(crate) priority: Priority,
    pub(crate) consumed: String,
    /// The priority queue its messages belong to.
    pub(crate) home: String,
}

impl RabbitMqDriver {
    /// The consumer tag for `queue`.
    fn consumer_tag(&self, queue: &str) -> String {
        let tag = &self.inner.options.consumer_tag;
        if queue == self.inner.queue {
            tag.clone()
        } else {
            format!("{tag}.{queue}")
        }
    }

    /// Makes sure `session` consumes every queue of `queues`, and the long-delay queue of each
    /// (where messages delayed longer than the ladder holds wait for a worker to send them on).
    ///
    /// A consumer is started in a task of its own, so a dropped `receive` never leaves a
    /// consumer on the broker without its forwarder.
    pub(crate) async fn consume(
        &self,
        session: &Arc<Session>,
        queues: &[(Priority, String)],
    ) -> Result<(), Error> {
        let wanted: Vec<Consumed> = queues
            .iter()
            .flat_map(|(priority, queue)| {
                [queue.clone(), long_delay_queue(queue)].map(|consumed| Consumed {
                    priority: *priority,
                    consumed,
                    home: queue.clone(),
                })
            })
            .collect();
        {
            let consumers = session.consumers.lock().await;
            if wanted.iter().all(|c| consumers.contains_key(&c.consumed)) {
                return Ok(());
            }
        }
        let driver = self.clone();
        let session = session.clone();
        hermes_core::driver::task::detached(async move {
            driver.start_consumers(&session, wanted).await
        })
        .await
    }

    async fn start_consumers(
        &self,
        session: &Arc<Session>,
        wanted: Vec<Consumed>,
    ) -> Result<(), Error> {
        let mut consumers = session.consumers.lock().await;
        for consumed in wanted {
            let queue = &consumed.consumed;
            if consumers.contains_key(queue) {
                continue;
            }
            session.declare(queue, FieldTable::default()).await?;
            let tag = self.consumer_tag(queue);
            let consumer = session
                .consumer
                .basic_consume(
                    queue.as_str().into(),
                    tag.as_str().into(),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await
                .map_err(lapin_error)?;
            let name = queue.clone();
            let forwarder = tokio::spawn(forward(
                Arc::downgrade(&self.inner),
                Arc::downgrade(session),
                consumed,
                consumer,
            ));
            consumers.insert(name, Consuming { tag, forwarder });
        }
        Ok(())
    }

    /// Stops this process's consumers, each after the deliveries the broker sent before its
    /// cancel. A later `receive` starts them again.
    pub(crate) async fn stop_consumers(&self) {
        let session = self.inner.session.lock().await.clone();
        let Some(session) = session else { return };
        let consumers: Vec<Consuming> = session
            .consumers
            .lock()
            .await
            .drain()
            .map(|(_, c)| c)
            .collect();
        for consuming in consumers {
            if session.alive() {
                let cancel = session
                    .consumer
                    .basic_cancel(consuming.tag.as_str().into(), BasicCancelOptions::default());
                let cancel = async { cancel.await.map_err(lapin_error) };
                let _ = bounded("cancelling a consumer", Some(&session), cancel).await;
            }
            // The consumer ends after the deliveries the broker sent before the cancel.
            if tokio::time::timeout(FORWARDER_END, consuming.forwarder)
                .await
                .is_err()
            {
                tracing::warn!("A consumer did not end within {FORWARDER_END:?} of its cancel");
            }
        }
    }
}

/// Moves the deliveries of one consumer into the driver's buffer until the consumer ends (its
/// channel closed or it was cancelled) or the driver is dropped.
async fn forward(
    inner: Weak<Inner>,
    session: Weak<Session>,
    from: Consumed,
    mut consumer: Consumer,
) {
    while let Some(Ok(delivery)) = consumer.next().await {
        let (Some(inner), Some(session)) = (inner.upgrade(), session.upgrade()) else {
            break;
        };
        let driver = RabbitMqDriver { inner };
        if let Err(error) = driver.accept(&session, &from, delivery).await {
            // Left unacknowledged: the broker delivers it again on the next session.
            tracing::warn!(
                "A delivery from {} could not be filed: {error}",
                from.consumed
            );
        }
    }
    if let Some(inner) = inner.upgrade() {
        // Waiting receives look at the connection again.
        inner.buffer.arrived.notify_waiters();
    }
}
