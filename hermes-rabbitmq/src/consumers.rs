//! The consumers of a session: one per consumed queue (each selected priority queue and its
//! long-delay queue), started on first use, each with a task that files its deliveries (see
//! `intake`). `flush` stops them.

use std::sync::{Arc, Weak};

use futures_util::StreamExt;
use hermes_core::{Error, Priority};
use lapin::Consumer;
use lapin::options::BasicConsumeOptions;
use lapin::types::FieldTable;

use crate::amqp::{Consuming, Session};
use crate::core::{Consumed, Core};
use crate::error::lapin_error;
use crate::naming::long_delay_queue;

impl Core {
    /// The consumer tag for `queue`.
    fn consumer_tag(&self, queue: &str) -> String {
        let tag = &self.options.consumer_tag;
        if queue == self.queue {
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
        self: &Arc<Self>,
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
        let core = self.clone();
        let session = session.clone();
        hermes_core::driver::task::detached(
            async move { core.start_consumers(&session, wanted).await },
        )
        .await
    }

    async fn start_consumers(
        self: &Arc<Self>,
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
                Arc::downgrade(self),
                Arc::downgrade(session),
                consumed,
                consumer,
            ));
            consumers.insert(name, Consuming { tag, forwarder });
        }
        Ok(())
    }
}

/// Moves the deliveries of one consumer into the driver's buffer until the consumer ends (its
/// channel closed or it was cancelled) or the driver is dropped.
async fn forward(core: Weak<Core>, session: Weak<Session>, from: Consumed, mut consumer: Consumer) {
    while let Some(Ok(delivery)) = consumer.next().await {
        let (Some(core), Some(session)) = (core.upgrade(), session.upgrade()) else {
            break;
        };
        if let Err(error) = core.accept(&session, &from, delivery).await {
            // Left unacknowledged: the broker delivers it again on the next session.
            tracing::warn!(
                "A delivery from {} could not be filed: {error}",
                from.consumed
            );
        }
    }
    if let Some(core) = core.upgrade() {
        // Waiting receives look at the connection again.
        core.buffer.arrived.notify_waiters();
    }
}
