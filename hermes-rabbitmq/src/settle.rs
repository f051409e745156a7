//! Acknowledgements: settling a handed-out message with the broker, and giving back the
//! deliveries no `receive` took.

use std::sync::Arc;

use hermes_core::Error;
use hermes_core::driver::{Delivery, Receipt};
use lapin::Acker;
use lapin::options::{BasicAckOptions, BasicNackOptions};

use crate::NAME;
use crate::buffer::Buffered;
use crate::driver::RabbitMqDriver;
use crate::error::lapin_error;
use crate::session::{COMMAND_TIMEOUT, Session, bounded};

/// A delivered message's acknowledgement handle, and its body as delivered.
#[derive(Debug)]
pub(crate) struct RabbitReceipt {
    acker: Acker,
    queue: String,
    pub(crate) session: Arc<Session>,
    pub(crate) body: Vec<u8>,
}

/// The receipt of `delivery`.
pub(crate) fn receipt(delivery: &Delivery) -> Result<&RabbitReceipt, Error> {
    delivery.receipt().downcast::<RabbitReceipt>(NAME)
}

/// A buffered delivery as `receive` returns it: a message with the receipt that settles it, or
/// the error of an undecodable body.
pub(crate) fn handed_out(item: Buffered) -> Result<Delivery, Error> {
    match item {
        Buffered::Message {
            priority,
            queue,
            message,
            body,
            acker,
            session,
        } => Ok(Delivery::new(
            message,
            priority,
            Receipt::new(RabbitReceipt {
                acker,
                queue,
                session,
                body,
            }),
        )),
        Buffered::Undecodable {
            quarantine, source, ..
        } => Err(Error::Undecodable { quarantine, source }),
    }
}

/// The options of a `basic.nack` that puts the message back in its queue.
fn requeue() -> BasicNackOptions {
    BasicNackOptions {
        requeue: true,
        ..BasicNackOptions::default()
    }
}

/// Acknowledges `delivery`: the broker removes the message.
pub(crate) async fn ack(delivery: &Delivery) -> Result<(), Error> {
    settle(delivery, async |acker| {
        acker.ack(BasicAckOptions::default()).await.map(drop)
    })
    .await
}

/// Gives `delivery` back to its queue, for another delivery.
pub(crate) async fn nack(delivery: &Delivery) -> Result<(), Error> {
    settle(delivery, async |acker| {
        acker.nack(requeue()).await.map(drop)
    })
    .await
}

/// Settles `delivery` with `settle` (ack or nack). When the session is gone, or does not take
/// the settlement within [`COMMAND_TIMEOUT`] (then it is given up), the broker delivers the
/// message again, and that is no error.
async fn settle(
    delivery: &Delivery,
    settle: impl AsyncFnOnce(&Acker) -> Result<(), lapin::Error>,
) -> Result<(), Error> {
    let receipt = receipt(delivery)?;
    let result = tokio::time::timeout(COMMAND_TIMEOUT, settle(&receipt.acker)).await;
    if result.is_err() {
        // Closing the session makes the broker deliver the message again.
        receipt.session.give_up();
    }
    receipt.session.flows.settled(&receipt.queue);
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) if receipt.session.alive() => Err(lapin_error(e)),
        // No answer in time, or the channel is gone: the broker delivers the message again.
        Ok(Err(_)) | Err(_) => {
            tracing::warn!(
                "The channel closed before the acknowledgement; the broker delivers the message again"
            );
            Ok(())
        }
    }
}

impl RabbitMqDriver {
    /// Gives back the deliveries waiting in the buffer, which no `receive` took.
    pub(crate) async fn give_back_buffered(&self) -> Result<(), Error> {
        for item in self.inner.buffer.drain() {
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
                    bounded("giving back a message", Some(&session), nack).await?;
                }
            }
        }
        Ok(())
    }
}
