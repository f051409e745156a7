//! Settling a claim, while it lasts: deleting the message (ack), making it visible again at
//! once (nack) or later (extend); and giving back at the end what this process holds.

use std::time::Duration;

use hermes_core::Error;
use hermes_core::driver::Delivery;
use tokio::time::Instant;

use crate::api::{change_visibility, delete};
use crate::core::{Core, SqsReceipt, drain, give_back, lock};

impl Core {
    pub(crate) async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        let Some(receipt) = SqsReceipt::lasting(delivery, "was acknowledged")? else {
            return Ok(());
        };
        delete(&self.client, &receipt.queue, &receipt.handle).await
    }

    pub(crate) async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        let receipt = SqsReceipt::of(delivery)?;
        if !receipt.holds() {
            return Ok(());
        }
        // A claim that is gone has made the message visible already.
        change_visibility(
            &self.client,
            &receipt.queue,
            &receipt.handle,
            Duration::ZERO,
        )
        .await
        .map(|_| ())
    }

    pub(crate) async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        let receipt = SqsReceipt::of(delivery)?;
        let asked = Instant::now();
        if receipt.holds()
            && change_visibility(&self.client, &receipt.queue, &receipt.handle, by).await?
        {
            let mut leased_until = lock(&receipt.leased_until);
            if leased_until.is_some() {
                *leased_until = Some(asked + by);
            }
            Ok(())
        } else {
            Err(Error::InvalidDelivery(
                "the claim expired before it was extended".to_owned(),
            ))
        }
    }

    pub(crate) async fn flush(&self) -> Result<(), Error> {
        self.polls_ended(self.options.wait_time + Duration::from_secs(5))
            .await;
        let held = drain(&mut self.state());
        if held.is_empty() {
            return Ok(());
        }
        give_back(&self.client, held).await
    }
}
