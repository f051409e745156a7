//! Settling a claim: `ack` deletes the row (at once, or deferred), `nack` gives it back at
//! once, `extend` moves the end of its lease, and `flush` gives back the rows held in the
//! buffer and removes the deferred acknowledgements. Each applies to its own claim only: once
//! another claim holds the row, nothing changes.
//!
//! Deferred acknowledgements wait to be removed with the next claim, or alone after
//! [`ACK_DELAY`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hermes_core::Error;
use hermes_core::driver::Delivery;

use crate::core::{Claim, Core, Held};

/// The longest a deferred acknowledgement waits for the next claim before it is sent alone.
pub const ACK_DELAY: Duration = Duration::from_millis(50);

/// How long deferred acknowledgements wait after a temporary failure before the next try.
const ACK_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Clears a flag of a [`Core`] when dropped: the task that set it ended, or died with its
/// runtime.
pub(crate) struct ClearOnDrop(pub(crate) Arc<Core>, pub(crate) fn(&Core) -> &AtomicBool);

impl Drop for ClearOnDrop {
    fn drop(&mut self) {
        (self.1)(&self.0).store(false, Ordering::Release);
    }
}

impl Core {
    pub(crate) fn claim_of(delivery: &Delivery) -> Result<Claim, Error> {
        delivery.receipt().downcast::<Claim>(crate::NAME).copied()
    }

    pub(crate) async fn ack(self: &Arc<Self>, delivery: &Delivery) -> Result<(), Error> {
        let claim = Core::claim_of(delivery)?;
        if self.options.deferred_acks {
            self.defer_acks(vec![claim]);
            return Ok(());
        }
        self.remove(&[claim]).await
    }

    pub(crate) async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        let claim = Core::claim_of(delivery)?;
        self.on_connection("giving a message back", |client| async move {
            let statement = client.prepare_cached(&self.sql.nack).await?;
            client
                .query(&statement, &[&claim.id, &claim.lease, &self.channel])
                .await
                .map(drop)
        })
        .await
    }

    pub(crate) async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        let claim = Core::claim_of(delivery)?;
        let by = by.as_secs_f64();
        let extended = self
            .on_connection("extending a claim", |client| async move {
                let statement = client.prepare_cached(&self.sql.extend).await?;
                client
                    .execute(&statement, &[&claim.id, &claim.lease, &by])
                    .await
            })
            .await?;
        if extended == 0 {
            return Err(Error::InvalidDelivery(
                "the claim expired: the message is delivered again".to_owned(),
            ));
        }
        Ok(())
    }

    /// Gives back the rows held in the buffer and removes the deferred acknowledgements,
    /// after any claim still running (a dropped `receive`'s) has added its rows.
    pub(crate) async fn flush(self: &Arc<Self>) -> Result<(), Error> {
        let _no_claim_runs = self.fetching.lock().await;
        let held: Vec<Held> = self.buffer().drain(..).collect();
        let acked = self.take_acked();
        let removed = if acked.is_empty() {
            Ok(())
        } else {
            let removed = self.remove(&acked).await;
            if removed.is_err() {
                self.defer_acks(acked);
            }
            removed
        };
        self.give_back(&held).await.and(removed)
    }

    /// Gives the rows of `held` back to their queues, due as they were, and wakes the idle
    /// workers; rows whose claim expired are left as they are.
    pub(crate) async fn give_back(&self, held: &[Held]) -> Result<(), Error> {
        if held.is_empty() {
            return Ok(());
        }
        let (ids, leases): (Vec<i64>, Vec<i64>) =
            held.iter().map(|h| (h.claim.id, h.claim.lease)).unzip();
        self.on_connection("giving messages back", |client| async move {
            let statement = client.prepare_cached(&self.sql.nack_many).await?;
            client
                .query(&statement, &[&ids, &leases, &self.channel])
                .await
                .map(drop)
        })
        .await
    }

    /// Deletes the rows of `claims` that these claims still hold.
    pub(crate) async fn remove(self: &Arc<Self>, claims: &[Claim]) -> Result<(), Error> {
        if claims.is_empty() {
            return Ok(());
        }
        let (ids, leases): (Vec<i64>, Vec<i64>) = claims.iter().map(|c| (c.id, c.lease)).unzip();
        self.on_connection("an acknowledgement", |client| async move {
            let statement = client.prepare_cached(&self.sql.ack_many).await?;
            client.execute(&statement, &[&ids, &leases]).await.map(drop)
        })
        .await?;
        self.deleted(claims.len());
        Ok(())
    }

    /// Takes the acknowledged claims waiting for removal.
    pub(crate) fn take_acked(&self) -> Vec<Claim> {
        std::mem::take(&mut *self.acked.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Queues claims for removal with the next claim, making sure a task removes them after
    /// [`ACK_DELAY`] if no claim comes first.
    pub(crate) fn defer_acks(self: &Arc<Self>, claims: Vec<Claim>) {
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
                // Lets the next acknowledgement schedule a removal should this task die with
                // its runtime.
                let scheduled = ClearOnDrop(core.clone(), |core: &Core| &core.flush_scheduled);
                tokio::time::sleep(ACK_DELAY).await;
                drop(scheduled);
                let acked = core.take_acked();
                if acked.is_empty() {
                    return;
                }
                match core.remove(&acked).await {
                    Ok(()) => {}
                    Err(e) if e.is_temporary() => {
                        tracing::warn!("Removing acknowledged rows failed, retrying later - {e}");
                        tokio::time::sleep(ACK_RETRY_AFTER).await;
                        core.defer_acks(acked);
                    }
                    Err(e) => {
                        // Their claims expire: the messages run again, as at-least-once
                        // delivery allows.
                        tracing::error!(
                            "Removing {} acknowledged rows failed; they will be delivered again - {e}",
                            acked.len()
                        );
                    }
                }
            });
        }
    }
}
