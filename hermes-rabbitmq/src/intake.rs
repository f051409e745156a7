//! Filing what a consumer delivers: a due message waits in the buffer for a `receive`, an
//! early one is delayed again, an undecodable one becomes a dead letter (see `dead_letters`)
//! or is rejected, and is reported.

use std::sync::Arc;

use hermes_core::Error;
use hermes_core::inspect::{DeadKind, DeadReason};
use hermes_core::time::unix_now;
use lapin::options::{BasicAckOptions, BasicNackOptions};

use crate::UndecodableAction;
use crate::amqp::Session;
use crate::core::{Buffered, Consumed, Core};
use crate::error::lapin_error;
use crate::naming::quarantine_queue;

impl Core {
    /// Files one delivery: a due message goes to the buffer; an early one is delayed again
    /// (down its home queue's ladder); an undecodable one becomes a dead letter of its home
    /// queue (or is only rejected) and is reported.
    pub(crate) async fn accept(
        &self,
        session: &Arc<Session>,
        from: &Consumed,
        delivery: lapin::message::Delivery,
    ) -> Result<(), Error> {
        let (queue, home, priority) = (from.consumed.as_str(), from.home.as_str(), from.priority);
        let message = match self.serializer.deserialize(&delivery.data) {
            Ok(message) => message,
            Err(source) => {
                let kept = match self.options.undecodable {
                    UndecodableAction::Reject => format!(
                        "nowhere: rejected from the RabbitMQ queue {queue}, kept only by its \
                         dead-letter policy"
                    ),
                    _ => {
                        let reason = DeadReason::new(DeadKind::Undecodable, source.to_string());
                        // Its digest and the time: the same bytes met again get another id.
                        let id = format!(
                            "undecodable-{}-{}",
                            source.sha256_prefix(),
                            (unix_now() * 1e6) as u64
                        );
                        self.bury(session, (home, priority), &id, &delivery.data, &reason)
                            .await?;
                        format!("the RabbitMQ queue {}", quarantine_queue(home))
                    }
                };
                // Rejected without requeue, as Hermes does: a dead-letter policy on the queue
                // gets it too.
                let reject = BasicNackOptions {
                    requeue: false,
                    ..BasicNackOptions::default()
                };
                delivery.acker.nack(reject).await.map_err(lapin_error)?;
                self.buffer.push(Buffered::Undecodable {
                    priority,
                    quarantine: kept,
                    source,
                });
                return Ok(());
            }
        };
        if message.execute_at().is_some_and(|at| at > unix_now()) {
            // Not due yet (put on the queue directly, back from a delay queue of earlier
            // versions, or a long delay's stop on the way): delay it again.
            self.route(session, home, &delivery.data, message.execute_at())
                .await?;
            return delivery
                .acker
                .ack(BasicAckOptions::default())
                .await
                .map(drop)
                .map_err(lapin_error);
        }
        session.flows.delivered(queue, || {
            self.buffer.push(Buffered::Message {
                priority,
                queue: queue.to_owned(),
                message,
                body: delivery.data,
                acker: delivery.acker,
                session: session.clone(),
            });
        });
        Ok(())
    }
}
