//! Settling a claim: deleting the file (ack), renaming it back into `new/` (nack), or renaming
//! it under a later claim time (extend).

use std::time::Duration;

use hermes_core::Error;
use hermes_core::driver::Delivery;
use hermes_core::time::unix_now;

use crate::core::{Claim, Core};
use crate::naming;

impl Core {
    pub(crate) async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        let claim = Claim::of(delivery)?;
        let claimed = claim.claimed();
        claim.queue.delete(&claimed)
    }

    pub(crate) async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        let claim = Claim::of(delivery)?;
        let claimed = claim.claimed();
        if claim.queue.give_back(&claimed, &claim.file)? {
            self.wake.notify_waiters();
        }
        Ok(())
    }

    pub(crate) async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        let visibility = self.options.visibility_timeout;
        if visibility.is_zero() {
            return Ok(());
        }
        let claim = Claim::of(delivery)?;
        let mut claimed = claim.claimed();
        // A claim expires at claim time + visibility timeout.
        let claim_time = unix_now() + by.as_secs_f64() - visibility.as_secs_f64();
        let renamed = naming::claimed_file(claim_time, &claim.file);
        if claim.queue.reclaim_as(&claimed, &renamed)? {
            *claimed = renamed;
            Ok(())
        } else {
            Err(Error::InvalidDelivery(format!(
                "the claim of {} expired before it was extended",
                claim.file
            )))
        }
    }
}
