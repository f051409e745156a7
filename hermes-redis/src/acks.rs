//! Deferred acknowledgements: acknowledged claims wait to be removed with the next claim, or
//! alone after [`ACK_DELAY`].

use std::sync::atomic::Ordering;
use std::time::Duration;

use hermes_core::Error;

use crate::driver::RedisSetDriver;

/// The longest a deferred acknowledgement waits for the next claim before it is sent alone.
pub const ACK_DELAY: Duration = Duration::from_millis(50);

impl RedisSetDriver {
    /// Takes the acknowledged claims waiting for removal.
    pub(crate) fn take_acked(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut *self.inner.acked.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Queues claims for removal with the next claim call, making sure a task removes them
    /// after [`ACK_DELAY`] if no claim comes first.
    pub(crate) fn defer_acks(&self, claims: Vec<Vec<u8>>) {
        if claims.is_empty() {
            return;
        }
        self.inner
            .acked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(claims);
        if !self.inner.flush_scheduled.swap(true, Ordering::AcqRel) {
            let driver = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(ACK_DELAY).await;
                driver.inner.flush_scheduled.store(false, Ordering::Release);
                if let Err(e) = driver.remove_acked().await {
                    tracing::warn!("Removing acknowledged claims failed, retrying later - {e}");
                }
            });
        }
    }

    /// Removes the deferred acknowledgements now.
    pub(crate) async fn remove_acked(&self) -> Result<(), Error> {
        let acked = self.take_acked();
        if acked.is_empty() {
            return Ok(());
        }
        let mut args: Vec<&[u8]> = vec![self.inner.keys.in_flight.as_bytes()];
        args.extend(acked.iter().map(Vec::as_slice));
        if let Err(e) = self.inner.client.command("ZREM", &args).await {
            self.defer_acks(acked);
            return Err(e);
        }
        Ok(())
    }
}
