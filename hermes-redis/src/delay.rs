//! The schedule: the sorted set where delayed messages wait for their due time, with the
//! priority each returns to. The claim script promotes them once due.

use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Error, Priority};

use crate::client::{Reply, Write};
use crate::core::{Core, flag};
use crate::scripts::Script;

impl Core {
    /// Puts `body` in the schedule, due at `due`, remembering `priority`; for a claimed
    /// message, only while `claim` (non-empty) lasts, which it ends.
    pub(crate) async fn schedule(
        &self,
        due: f64,
        body: &[u8],
        priority: Priority,
        claim: &[u8],
        wake: bool,
    ) -> Result<(), Error> {
        let mut keys = vec![
            self.keys.schedule.as_str(),
            &self.keys.schedule_index,
            &self.keys.in_flight,
        ];
        if wake {
            keys.push(&self.keys.wake);
        }
        let priority = if priority == DEFAULT_PRIORITY {
            String::new()
        } else {
            priority.to_string()
        };
        let due = due.to_string();
        let now = unix_now().to_string();
        self.emit_write(Write::Script(
            Script::Schedule,
            &keys,
            &[
                due.as_bytes(),
                body,
                priority.as_bytes(),
                now.as_bytes(),
                claim,
            ],
        ))
        .await?;
        Ok(())
    }

    /// The scheduled messages of the queue of `priority` that are `which` ('due', 'later' or
    /// 'all'), soonest due first, at most `limit` (0: all), removed when `remove`.
    pub(crate) async fn scheduled(
        &self,
        priority: Priority,
        which: &str,
        limit: usize,
        remove: bool,
    ) -> Result<Vec<Vec<u8>>, Error> {
        let keys = [
            self.keys.schedule.as_str(),
            &self.keys.schedule_index,
            &self.keys.legacy_schedule_priorities,
        ];
        let mut args = vec![
            unix_now().to_string(),
            priority.to_string(),
            flag(priority == DEFAULT_PRIORITY),
            which.to_owned(),
            limit.to_string(),
            flag(remove),
        ];
        args.extend(self.other_priorities());
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let reply = self.client.eval(Script::Scheduled, &keys, &args).await?;
        Ok(reply
            .into_items()
            .into_iter()
            .step_by(2)
            .filter_map(Reply::into_bytes)
            .collect())
    }
}
