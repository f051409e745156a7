//! Pauses and cancellations: the set `<default set>_paused` of what is paused, and the
//! requests to cancel as the sorted set `<default set>_cancelled` (ids by time) beside the hash
//! `<default set>_cancellations` (id → record), both in the queue's hash slot.

use hermes_core::Error;
use hermes_core::driver::{Controls, async_trait};
use hermes_core::flow::{CANCELLATIONS_KEPT, Cancellation, PauseTarget};
use hermes_core::time::unix_now;
use serde::{Deserialize, Serialize};

use crate::core::Core;
use crate::scripts::Script;

/// A cancellation as the hash keeps it.
#[derive(Serialize, Deserialize)]
struct Record {
    id: String,
    by: String,
    at: f64,
}

/// The oldest request time kept.
fn oldest_kept() -> String {
    (unix_now() - CANCELLATIONS_KEPT.as_secs_f64()).to_string()
}

#[async_trait]
impl Controls for Core {
    async fn pause(&self, target: &PauseTarget) -> Result<(), Error> {
        let target = target.to_string();
        self.client
            .command("SADD", &[self.keys.paused.as_bytes(), target.as_bytes()])
            .await?;
        Ok(())
    }

    async fn resume(&self, target: &PauseTarget) -> Result<bool, Error> {
        let target = target.to_string();
        let removed = self
            .client
            .command("SREM", &[self.keys.paused.as_bytes(), target.as_bytes()])
            .await?;
        Ok(removed.count() > 0)
    }

    async fn paused(&self) -> Result<Vec<PauseTarget>, Error> {
        let members = self
            .client
            .command("SMEMBERS", &[self.keys.paused.as_bytes()])
            .await?;
        let mut paused: Vec<PauseTarget> = members
            .into_items()
            .into_iter()
            .filter_map(|m| String::from_utf8(m.into_bytes()?).ok())
            // What another process wrote wrongly pauses nothing.
            .filter_map(|m| m.parse().ok())
            .collect();
        paused.sort();
        Ok(paused)
    }

    async fn cancel(&self, cancellation: &Cancellation) -> Result<(), Error> {
        let record = serde_json::to_vec(&Record {
            id: cancellation.id.clone(),
            by: cancellation.by.clone(),
            at: cancellation.at,
        })
        .map_err(|e| self.reply_error(&format!("a cancellation ({e})")))?;
        let at = cancellation.at.to_string();
        let oldest = oldest_kept();
        self.client
            .eval(
                Script::Cancel,
                &[&self.keys.cancelled, &self.keys.cancellations],
                &[
                    cancellation.id.as_bytes(),
                    at.as_bytes(),
                    &record,
                    oldest.as_bytes(),
                ],
            )
            .await?;
        Ok(())
    }

    async fn cancellations(&self, since: f64) -> Result<Vec<Cancellation>, Error> {
        let since = since.to_string();
        let oldest = oldest_kept();
        let records = self
            .client
            .eval(
                Script::Cancellations,
                &[&self.keys.cancelled, &self.keys.cancellations],
                &[since.as_bytes(), oldest.as_bytes()],
            )
            .await?;
        Ok(records
            .into_items()
            .into_iter()
            .filter_map(|r| serde_json::from_slice::<Record>(&r.into_bytes()?).ok())
            .map(|r| {
                let mut cancellation = Cancellation::new(r.id, r.by);
                cancellation.at = r.at;
                cancellation
            })
            .collect())
    }
}
