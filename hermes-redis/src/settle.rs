//! Settling a claim: removing it (ack), at once or deferred, putting the message back in its
//! set (nack), moving the claim's time forward (extend), and what `flush` leaves settled.
//!
//! Deferred acknowledgements: acknowledged claims wait to be removed with the next claim, or
//! alone after [`ACK_DELAY`].

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hermes_core::Error;
use hermes_core::driver::Delivery;

use crate::core::{Core, Taken};
use crate::scripts::Script;

/// The longest a deferred acknowledgement waits for the next claim before it is sent alone.
pub const ACK_DELAY: Duration = Duration::from_millis(50);

impl Core {
    pub(crate) async fn ack(self: &Arc<Self>, delivery: &Delivery) -> Result<(), Error> {
        let taken = self.taken(delivery)?;
        if !taken.claimed {
            return Ok(());
        }
        if self.options.deferred_acks {
            self.defer_acks(vec![taken.claim().to_vec()]);
            return Ok(());
        }
        self.client
            .command("ZREM", &[self.keys.in_flight.as_bytes(), taken.claim()])
            .await?;
        Ok(())
    }

    pub(crate) async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.give_back(self.taken(delivery)?).await?;
        self.wake_workers();
        Ok(())
    }

    pub(crate) async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        let taken = self.taken(delivery)?;
        if !taken.claimed {
            return Ok(());
        }
        let by = by.as_secs_f64().to_string();
        let visibility = self.options.visibility_timeout.as_secs_f64().to_string();
        let reply = self
            .client
            .eval(
                Script::Extend,
                &[&self.keys.in_flight],
                &[taken.claim(), by.as_bytes(), visibility.as_bytes()],
            )
            .await?;
        if reply.as_int() == Some(1) {
            Ok(())
        } else {
            Err(Error::InvalidDelivery(
                "the claim expired before it was extended".to_owned(),
            ))
        }
    }

    /// Gives back the messages claimed ahead, removes the deferred acknowledgements and sends
    /// the wake-up poke still owed.
    pub(crate) async fn flush(self: &Arc<Self>) -> Result<(), Error> {
        let buffered: Vec<Taken> = self.buffer().drain(..).collect();
        let poked = self.wakes.flush().await;
        let acked = self.remove_acked().await;
        self.give_back_all(&buffered).await.and(acked).and(poked)
    }

    /// Gives back every one of `taken`; the first error, if any, after trying all.
    pub(crate) async fn give_back_all(&self, taken: &[Taken]) -> Result<(), Error> {
        let mut result = Ok(());
        for t in taken {
            if let Err(e) = self.give_back(t).await {
                result = result.and(Err(e));
            }
        }
        result
    }

    /// Puts a message back in its set; a claimed one only while its claim lasts.
    async fn give_back(&self, taken: &Taken) -> Result<(), Error> {
        let set = self.set_of(taken.priority);
        if taken.claimed {
            let keys = [self.keys.in_flight.as_str(), &set];
            self.client
                .eval(Script::Nack, &keys, &[taken.claim()])
                .await?;
        } else {
            self.client
                .command("SADD", &[set.as_bytes(), taken.body()])
                .await?;
        }
        Ok(())
    }

    /// Takes the acknowledged claims waiting for removal.
    pub(crate) fn take_acked(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut *self.acked.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Queues claims for removal with the next claim call, making sure a task removes them
    /// after [`ACK_DELAY`] if no claim comes first.
    pub(crate) fn defer_acks(self: &Arc<Self>, claims: Vec<Vec<u8>>) {
        if claims.is_empty() {
            return;
        }
        self.acked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(claims);
        if !self.flush_scheduled.swap(true, Ordering::AcqRel) {
            let core = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(ACK_DELAY).await;
                core.flush_scheduled.store(false, Ordering::Release);
                if let Err(e) = core.remove_acked().await {
                    tracing::warn!("Removing acknowledged claims failed, retrying later - {e}");
                }
            });
        }
    }

    /// Removes the deferred acknowledgements now.
    async fn remove_acked(self: &Arc<Self>) -> Result<(), Error> {
        let acked = self.take_acked();
        if acked.is_empty() {
            return Ok(());
        }
        let mut args: Vec<&[u8]> = vec![self.keys.in_flight.as_bytes()];
        args.extend(acked.iter().map(Vec::as_slice));
        if let Err(e) = self.client.command("ZREM", &args).await {
            self.defer_acks(acked);
            return Err(e);
        }
        Ok(())
    }
}
