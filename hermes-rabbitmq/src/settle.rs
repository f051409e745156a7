//! Settling deliveries with the broker: acknowledging one (ack), giving one back (nack), and
//! flushing what this process holds: its consumers stopped, the deliveries no `receive` took
//! given back.

use std::time::Duration;

use hermes_core::Error;
use hermes_core::driver::Delivery;
use lapin::Acker;
use lapin::options::{BasicAckOptions, BasicCancelOptions, BasicNackOptions};

use crate::amqp::{Consuming, lift};
use crate::core::{Buffered, Core, RabbitReceipt};
use crate::error::lapin_error;

/// How long `flush` waits for a cancelled consumer's last deliveries.
const FORWARDER_END: Duration = Duration::from_secs(5);

/// The options of a `basic.nack` that puts the message back in its queue.
fn requeue() -> BasicNackOptions {
    BasicNackOptions {
        requeue: true,
        ..BasicNackOptions::default()
    }
}

impl Core {
    /// Acknowledges `delivery`: the broker removes the message.
    pub(crate) async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        settle(delivery, async |acker| {
            acker.ack(BasicAckOptions::default()).await.map(drop)
        })
        .await
    }

    /// Gives `delivery` back to its queue, for another delivery.
    pub(crate) async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        settle(delivery, async |acker| {
            acker.nack(requeue()).await.map(drop)
        })
        .await
    }

    /// Stops this process's consumers and gives back the messages they delivered that no
    /// `receive` took. A later `receive` starts the consumers again.
    pub(crate) async fn flush(&self) -> Result<(), Error> {
        self.stop_consumers().await;
        self.give_back_buffered().await
    }

    /// Stops this process's consumers, each after the deliveries the broker sent before its
    /// cancel.
    async fn stop_consumers(&self) {
        let session = self.session.lock().await.clone();
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
                let _ = session.bounded("cancelling a consumer", cancel).await;
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

    /// Gives back the deliveries waiting in the buffer, which no `receive` took.
    async fn give_back_buffered(&self) -> Result<(), Error> {
        for item in self.buffer.drain() {
            if let Buffered::Message {
                acker,
                queue,
                session,
                ..
            } = item
            {
                session.flows.settled(&queue);
                if session.alive() {
                    let nack = async { acker.nack(requeue()).await.map_err(lapin_error) };
                    session.bounded("giving back a message", nack).await?;
                }
            }
        }
        Ok(())
    }
}

/// Settles `delivery` with `settle` (ack or nack). When the session is gone, or does not take
/// the settlement within [`CALL_TIMEOUT`](hermes_core::driver::CALL_TIMEOUT) (then it is
/// given up), the broker delivers the message again, and that is no error.
async fn settle(
    delivery: &Delivery,
    settle: impl AsyncFnOnce(&Acker) -> Result<(), lapin::Error>,
) -> Result<(), Error> {
    let receipt = RabbitReceipt::of(delivery)?;
    let session = &receipt.session;
    // Given up when it does not answer in time: closing it makes the broker deliver the
    // message again.
    let settled = session
        .bounded("settling a message", lift(settle(&receipt.acker)))
        .await;
    session.flows.settled(&receipt.queue);
    match settled {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) if session.alive() => Err(lapin_error(e)),
        // No answer in time, or the channel is gone: the broker delivers the message again.
        Ok(Err(_)) | Err(_) => {
            tracing::warn!(
                "The channel closed before the acknowledgement; the broker delivers the message again"
            );
            Ok(())
        }
    }
}
