//! Dead letters: the table `<schema>.dead_letters`, one row per message that failed for good
//! or could not be decoded, with its reason as JSON. Moving a claimed row there and applying
//! [`PostgresOptions::retention`](crate::PostgresOptions::retention) is one call of the
//! schema's `bury` function; replaying moves rows back in one statement per chunk.

use hermes_core::driver::{DeadLetters, Delivery, async_trait};
use hermes_core::inspect::{DeadKind, DeadLetter, DeadReason, Replay};
use hermes_core::time::unix_now;
use hermes_core::{Error, Priority};

use crate::core::{Claim, Core};
use crate::inspect::UNDECODABLE_ID;

/// How many dead letters one replaying statement puts back.
const REPLAY_CHUNK: usize = 500;

#[async_trait]
impl DeadLetters for Core {
    async fn add(&self, delivery: &Delivery, reason: &DeadReason) -> Result<(), Error> {
        let claim = Core::claim_of(delivery)?;
        if self
            .bury(claim, Some(delivery.message().id()), reason)
            .await?
        {
            Ok(())
        } else {
            Err(Error::InvalidDelivery(
                "the claim expired before the message became a dead letter; it is delivered again"
                    .to_owned(),
            ))
        }
    }

    async fn list(&self, priority: Priority, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        let queue = self.queues.get(priority)?;
        Ok(self
            .stored(&queue, limit)
            .await?
            .into_iter()
            .map(|stored| stored.letter(priority))
            .collect())
    }

    async fn replay(&self, priority: Priority, replay: &Replay) -> Result<u64, Error> {
        let queue = self.queues.get(priority)?;
        let mut back = Vec::new();
        for stored in self.stored(&queue, usize::MAX).await? {
            let row = stored.row;
            let body = stored.body.clone();
            let letter = stored.letter(priority);
            if !replay.selects(&letter) {
                continue;
            }
            let (body, id) = match &letter.message {
                Some(message) => {
                    let message = replay.replayed(message);
                    let id = message.id().to_owned();
                    (self.serializer.serialize(&message)?, Some(id))
                }
                None => (body, None),
            };
            back.push((row, body, id));
        }
        let mut replayed = 0;
        for chunk in back.chunks(REPLAY_CHUNK) {
            let rows: Vec<i64> = chunk.iter().map(|(row, _, _)| *row).collect();
            let bodies: Vec<&[u8]> = chunk.iter().map(|(_, body, _)| body.as_slice()).collect();
            let ids: Vec<Option<&str>> = chunk.iter().map(|(_, _, id)| id.as_deref()).collect();
            let queue = queue.as_str();
            let row = self
                .on_connection("replaying dead letters", |client| async move {
                    let statement = client.prepare_cached(&self.sql.unbury).await?;
                    client
                        .query_one(&statement, &[&queue, &priority, &rows, &bodies, &ids])
                        .await
                })
                .await?;
            replayed += u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
        }
        if replayed > 0 {
            // The letters are back: a worker that misses this wake-up finds them at its next
            // look.
            if let Err(e) = self.notify(&queue).await {
                tracing::debug!("Waking workers after a replay failed - {e}");
            }
        }
        Ok(replayed)
    }
}

/// A dead letter as stored.
struct Stored {
    row: i64,
    message_id: Option<String>,
    body: Vec<u8>,
    reason: DeadReason,
    message: Option<hermes_core::Message>,
}

impl Stored {
    fn letter(self, priority: Priority) -> DeadLetter {
        let id = match self.message_id {
            Some(id) if self.message.is_some() => id,
            _ => format!("{UNDECODABLE_ID}{}", self.row),
        };
        DeadLetter::new(id, priority, self.reason).with_message(self.message)
    }
}

impl Core {
    /// Moves the row of `claim` to the dead letters as the message `message_id` (`None`: it
    /// could not be decoded) with `reason`, applying the retention; `false` when the claim no
    /// longer holds the row.
    pub(crate) async fn bury(
        &self,
        claim: Claim,
        message_id: Option<&str>,
        reason: &DeadReason,
    ) -> Result<bool, Error> {
        let retention = &self.options.retention;
        let max_count = i32::try_from(retention.max_count).unwrap_or(i32::MAX);
        let oldest_kept = unix_now() - retention.max_age.as_secs_f64();
        let why = reason.to_json();
        let row = self
            .on_connection("keeping a dead letter", |client| async move {
                let statement = client.prepare_cached(&self.sql.bury).await?;
                client
                    .query_one(
                        &statement,
                        &[
                            &claim.id,
                            &claim.lease,
                            &message_id,
                            &why,
                            &reason.at,
                            &max_count,
                            &oldest_kept,
                        ],
                    )
                    .await
            })
            .await?;
        Ok(row.get(0))
    }

    /// Up to `limit` dead letters of `queue`, oldest first.
    async fn stored(&self, queue: &str, limit: usize) -> Result<Vec<Stored>, Error> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .on_connection("reading dead letters", |client| async move {
                let statement = client.prepare_cached(&self.sql.dead_letters).await?;
                client.query(&statement, &[&queue, &limit]).await
            })
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let body: Vec<u8> = row.get(2);
                let reason: String = row.get(3);
                Stored {
                    row: row.get(0),
                    message_id: row.get(1),
                    message: self.serializer.deserialize(&body).ok(),
                    body,
                    reason: DeadReason::from_json(reason.as_bytes()).unwrap_or_else(|| {
                        DeadReason::new(DeadKind::Undecodable, "no reason recorded")
                    }),
                }
            })
            .collect())
    }

    /// Wakes the workers idle on `queue`'s schema.
    pub(crate) async fn notify(&self, queue: &str) -> Result<(), Error> {
        self.on_connection("waking workers", |client| async move {
            let statement = client.prepare_cached(&self.sql.notify).await?;
            client
                .query(&statement, &[&self.channel, &queue])
                .await
                .map(drop)
        })
        .await
    }
}
