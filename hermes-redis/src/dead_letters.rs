//! Dead letters, kept per queue beside its set: the sorted set `<set>_dead` of their ids,
//! scored by the time they died, and the hash `<set>_dead_letters` of their records (the
//! reason as JSON, a newline, then the message as it was stored). PHP Hermes never reads
//! either. [`RedisOptions::retention`](crate::RedisOptions::retention) caps them.

use hermes_core::driver::{DeadLetters, Delivery, async_trait};
use hermes_core::inspect::{DeadKind, DeadLetter, DeadReason, Replay};
use hermes_core::time::unix_now;
use hermes_core::{Error, Priority};

use crate::client::Reply;
use crate::core::{Core, Taken};
use crate::naming::Keys;
use crate::scripts::Script;

/// How many dead letters one `UNBURY` call takes.
const UNBURY_BATCH: usize = 100;

/// A dead letter's record: the reason, a newline, the body.
fn record(reason: &DeadReason, body: &[u8]) -> Vec<u8> {
    let mut record = reason.to_json().into_bytes();
    record.push(b'\n');
    record.extend_from_slice(body);
    record
}

/// The reason and the body of a record.
fn parse_record(record: &[u8]) -> (DeadReason, &[u8]) {
    let (head, body) = match record.iter().position(|b| *b == b'\n') {
        Some(newline) => (&record[..newline], &record[newline + 1..]),
        None => (&record[..0], record),
    };
    let reason = DeadReason::from_json(head)
        .unwrap_or_else(|| DeadReason::new(DeadKind::Undecodable, "no reason recorded"));
    (reason, body)
}

/// A dead letter read from the store.
pub(crate) struct Stored {
    pub(crate) id: String,
    reason: DeadReason,
    pub(crate) body: Vec<u8>,
}

#[async_trait]
impl DeadLetters for Core {
    async fn add(&self, delivery: &Delivery, reason: &DeadReason) -> Result<(), Error> {
        let taken = self.taken(delivery)?;
        if self.bury(taken, delivery.message().id(), reason).await? {
            Ok(())
        } else {
            Err(Error::InvalidDelivery(
                "the claim expired before the message became a dead letter; it is delivered again"
                    .to_owned(),
            ))
        }
    }

    async fn list(&self, priority: Priority, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        if limit == 0 {
            self.sets.get(priority)?;
            return Ok(Vec::new());
        }
        Ok(self
            .stored(priority, limit)
            .await?
            .into_iter()
            .map(|s| self.letter(priority, s).0)
            .collect())
    }

    async fn replay(&self, priority: Priority, replay: &Replay) -> Result<u64, Error> {
        let mut back = Vec::new();
        for stored in self.stored(priority, 0).await? {
            let stored_id = stored.id.clone();
            let (letter, body) = self.letter(priority, stored);
            if !replay.selects(&letter) {
                continue;
            }
            let body = match &letter.message {
                Some(message) => self.serializer.serialize(&replay.replayed(message))?,
                None => body,
            };
            back.push((stored_id, body));
        }
        let replayed = self.unbury(priority, true, &back).await?;
        if replayed > 0 {
            self.wake_workers();
        }
        Ok(replayed)
    }
}

impl Core {
    /// Keeps `taken` as the dead letter `id` of its queue, ending its claim, and applies the
    /// retention; `false` when the claim had expired (nothing is kept).
    pub(crate) async fn bury(
        &self,
        taken: &Taken,
        id: &str,
        reason: &DeadReason,
    ) -> Result<bool, Error> {
        let (ids, letters) = Keys::dead(&self.set_of(taken.priority));
        let retention = &self.options.retention;
        let at = reason.at.to_string();
        let max = retention.max_count.to_string();
        let oldest_kept = (unix_now() - retention.max_age.as_secs_f64()).to_string();
        let record = record(reason, taken.body());
        let suffix = format!("{:016x}", rand::random::<u64>());
        let keys = [self.keys.in_flight.as_str(), &ids, &letters];
        let args: [&[u8]; 7] = [
            taken.claim(),
            id.as_bytes(),
            &record,
            at.as_bytes(),
            max.as_bytes(),
            oldest_kept.as_bytes(),
            suffix.as_bytes(),
        ];
        let reply = self.client.eval(Script::Bury, &keys, &args).await?;
        Ok(reply.as_int() == Some(1))
    }

    /// Up to `limit` dead letters of the queue of `priority` (0: all), oldest first.
    pub(crate) async fn stored(
        &self,
        priority: Priority,
        limit: usize,
    ) -> Result<Vec<Stored>, Error> {
        let (ids_key, letters_key) = Keys::dead(&self.sets.get(priority)?);
        let stop = match i64::try_from(limit) {
            Ok(limit) if limit > 0 => (limit - 1).to_string(),
            _ => "-1".to_owned(),
        };
        let ids: Vec<Vec<u8>> = self
            .client
            .command("ZRANGE", &[ids_key.as_bytes(), b"0", stop.as_bytes()])
            .await?
            .into_items()
            .into_iter()
            .filter_map(Reply::into_bytes)
            .collect();
        let mut stored = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(UNBURY_BATCH) {
            let mut args: Vec<&[u8]> = vec![letters_key.as_bytes()];
            args.extend(chunk.iter().map(Vec::as_slice));
            let records = self.client.command("HMGET", &args).await?.into_items();
            for (id, record) in chunk.iter().zip(records) {
                let Some(record) = record.into_bytes() else {
                    continue;
                };
                let (reason, body) = parse_record(&record);
                stored.push(Stored {
                    id: String::from_utf8_lossy(id).into_owned(),
                    reason,
                    body: body.to_vec(),
                });
            }
        }
        Ok(stored)
    }

    fn letter(&self, priority: Priority, stored: Stored) -> (DeadLetter, Vec<u8>) {
        let message = self.serializer.deserialize(&stored.body).ok();
        let letter = DeadLetter::new(stored.id, priority, stored.reason).with_message(message);
        (letter, stored.body)
    }

    /// Takes the dead letters `ids` (with the bodies to put back when replaying) out of the
    /// store of the queue of `priority`; returns how many it took.
    pub(crate) async fn unbury(
        &self,
        priority: Priority,
        replay: bool,
        letters: &[(String, Vec<u8>)],
    ) -> Result<u64, Error> {
        let set = self.sets.get(priority)?;
        let (ids_key, letters_key) = Keys::dead(&set);
        let keys = [ids_key.as_str(), &letters_key, &set];
        let mode: &[u8] = if replay { b"replay" } else { b"forget" };
        let mut taken = 0;
        for chunk in letters.chunks(UNBURY_BATCH) {
            let mut args: Vec<&[u8]> = vec![mode];
            for (id, body) in chunk {
                args.push(id.as_bytes());
                args.push(body);
            }
            taken += self
                .client
                .eval(Script::Unbury, &keys, &args)
                .await?
                .count();
        }
        Ok(taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_holds_the_reason_and_the_body_as_it_was() {
        let reason = DeadReason::new(DeadKind::Failed, "line one\nline two")
            .with_handler("Archiver")
            .with_retries(2);
        let body = b"{\"not\":\n\"json\xff";
        let stored = record(&reason, body);
        let (read, read_body) = parse_record(&stored);
        assert_eq!(read, reason);
        assert_eq!(read_body, body);
        let (unknown, whole) = parse_record(b"garbage");
        assert_eq!(unknown.kind, DeadKind::Undecodable);
        assert_eq!(whole, b"garbage");
    }
}
