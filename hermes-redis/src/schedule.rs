//! The schedule: the sorted set where delayed messages wait for their due time, with the
//! priority each returns to.

use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Error, Priority};

use crate::driver::RedisSetDriver;
use crate::scripts::Script;

impl RedisSetDriver {
    /// Puts `body` in the schedule, due at `due`, remembering `priority`; for a claimed
    /// message, only while `claim` (non-empty) lasts, which it ends.
    pub(crate) async fn schedule(
        &self,
        due: f64,
        body: &[u8],
        priority: Priority,
        claim: &[u8],
    ) -> Result<(), Error> {
        let keys = [
            self.inner.keys.schedule.as_str(),
            &self.inner.keys.schedule_index,
            &self.inner.keys.in_flight,
        ];
        let priority = if priority == DEFAULT_PRIORITY {
            String::new()
        } else {
            priority.to_string()
        };
        let due = due.to_string();
        let now = unix_now().to_string();
        self.inner
            .client
            .eval(
                Script::Schedule,
                &keys,
                &[
                    due.as_bytes(),
                    body,
                    priority.as_bytes(),
                    now.as_bytes(),
                    claim,
                ],
            )
            .await?;
        Ok(())
    }
}
