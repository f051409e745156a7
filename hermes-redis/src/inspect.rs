//! The Redis driver's inspection: exact figures, peeks, purges and deletes, and the dead
//! letters, kept per queue beside its set: the sorted set `<set>_dead` of their ids, scored by
//! the time they died, and the hash `<set>_dead_letters` of their records (the reason as JSON,
//! a newline, then the message as it was stored). PHP Hermes never reads either.

use std::time::Duration;

use hermes_core::driver::Delivery;
use hermes_core::inspect::{DeadLetter, DeadReason, Figure, QueueState, QueueStats, Replay};
use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Error, Message, Priority};

use crate::claim::{RedisReceipt, Taken};
use crate::client::Reply;
use crate::driver::RedisSetDriver;
use crate::naming::Keys;
use crate::scripts::Script;

/// The largest set whose latency is read: the due time of every member is looked at. A larger
/// set's latency is [`Figure::Unknown`].
pub const LATENCY_SCAN_LIMIT: u64 = 1_000;

/// How many members one `SSCAN` asks for.
const SCAN_COUNT: &str = "500";

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
    let reason = DeadReason::from_json(head).unwrap_or_else(|| {
        DeadReason::new(
            hermes_core::inspect::DeadKind::Undecodable,
            "no reason recorded",
        )
    });
    (reason, body)
}

fn items(reply: Reply) -> Vec<Reply> {
    match reply {
        Reply::Array(items) => items,
        _ => Vec::new(),
    }
}

fn count(reply: &Reply) -> u64 {
    reply
        .as_int()
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}

fn flag(on: bool) -> String {
    if on { "1" } else { "0" }.to_owned()
}

/// A dead letter read from the store.
struct Stored {
    id: String,
    reason: DeadReason,
    body: Vec<u8>,
}

impl RedisSetDriver {
    /// The claims and bodies of the messages of the queue whose set is `set` that this process
    /// claimed ahead and no handler has yet: for the queue they are waiting, not in flight.
    fn claimed_ahead(&self, set: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.buffer()
            .iter()
            .filter(|t| t.claimed && *self.set_of(t.priority) == *set)
            .map(|t| (t.claim().to_vec(), t.body().to_vec()))
            .collect()
    }

    /// Keeps `taken` as the dead letter `id` of its queue, ending its claim, and applies the
    /// retention; `false` when the claim had expired (nothing is kept).
    pub(crate) async fn bury(
        &self,
        taken: &Taken,
        id: &str,
        reason: &DeadReason,
    ) -> Result<bool, Error> {
        let (ids, letters) = Keys::dead(&self.set_of(taken.priority));
        let retention = &self.inner.options.retention;
        let at = reason.at.to_string();
        let max = retention.max_count.to_string();
        let oldest_kept = (unix_now() - retention.max_age.as_secs_f64()).to_string();
        let record = record(reason, taken.body());
        let suffix = format!("{:016x}", rand::random::<u64>());
        let keys = [self.inner.keys.in_flight.as_str(), &ids, &letters];
        let args: [&[u8]; 7] = [
            taken.claim(),
            id.as_bytes(),
            &record,
            at.as_bytes(),
            max.as_bytes(),
            oldest_kept.as_bytes(),
            suffix.as_bytes(),
        ];
        let reply = self.inner.client.eval(Script::Bury, &keys, &args).await?;
        Ok(reply.as_int() == Some(1))
    }

    pub(crate) async fn dead_letter_now(
        &self,
        delivery: &Delivery,
        reason: &DeadReason,
    ) -> Result<(), Error> {
        let RedisReceipt(taken) = delivery
            .receipt()
            .downcast::<RedisReceipt>(self.name_of())?;
        if self.bury(taken, delivery.message().id(), reason).await? {
            Ok(())
        } else {
            Err(Error::InvalidDelivery(
                "the claim expired before the message became a dead letter; it is delivered again"
                    .to_owned(),
            ))
        }
    }

    fn name_of(&self) -> &'static str {
        self.inner.client.name()
    }

    pub(crate) async fn stats_now(&self) -> Result<Vec<QueueStats>, Error> {
        let queues = self.inner.sets.all();
        let dead: Vec<String> = queues.iter().map(|(_, set)| Keys::dead(set).0).collect();
        let mut keys: Vec<&str> = vec![
            &self.inner.keys.schedule,
            &self.inner.keys.schedule_index,
            &self.inner.keys.legacy_schedule_priorities,
            &self.inner.keys.in_flight,
        ];
        for ((_, set), dead) in queues.iter().zip(&dead) {
            keys.push(set);
            keys.push(dead);
        }
        let now = unix_now();
        let default_index = queues
            .iter()
            .position(|(p, _)| *p == DEFAULT_PRIORITY)
            .map_or(1, |i| i + 1);
        let mut args = vec![now.to_string(), queues.len().to_string()];
        args.extend(queues.iter().map(|(p, _)| p.to_string()));
        args.push(default_index.to_string());
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let reply = items(self.inner.client.eval(Script::Stats, &keys, &args).await?);
        let mut stats = Vec::with_capacity(queues.len());
        for ((priority, set), figures) in queues.iter().zip(reply.chunks(6)) {
            let [members, due, later, flight, dead, oldest] = figures else {
                return Err(self.reply_error("the stats script"));
            };
            let ahead = self.claimed_ahead(set);
            let members = count(members);
            let waiting = members + count(due) + ahead.len() as u64;
            let oldest_scheduled = oldest
                .clone()
                .into_bytes()
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|s| s.parse::<f64>().ok());
            let latency = if waiting == 0 {
                Figure::Exact(Duration::ZERO)
            } else if members > LATENCY_SCAN_LIMIT {
                // The set may hold messages older than any scheduled one.
                Figure::Unknown
            } else {
                let mut bodies = self.members(set).await?;
                bodies.extend(ahead.iter().map(|(_, body)| body.clone()));
                let oldest_member = bodies
                    .iter()
                    .filter_map(|body| self.inner.serializer.deserialize(body).ok())
                    .map(|m| m.due())
                    .reduce(f64::min);
                let oldest = [oldest_member, oldest_scheduled]
                    .into_iter()
                    .flatten()
                    .reduce(f64::min);
                oldest.map_or(Figure::Unknown, |due| {
                    Figure::Exact(Duration::try_from_secs_f64(now - due).unwrap_or_default())
                })
            };
            let mut queue = QueueStats::unknown(set.to_string(), *priority);
            queue.waiting = Figure::Exact(waiting);
            queue.delayed = Figure::Exact(count(later));
            queue.in_flight = if self.at_least_once() {
                Figure::Exact(count(flight).saturating_sub(ahead.len() as u64))
            } else {
                // Taken messages leave Redis at once: nothing tells how many are handled.
                Figure::Unknown
            };
            queue.dead = Figure::Exact(count(dead));
            queue.latency = latency;
            stats.push(queue);
        }
        Ok(stats)
    }

    fn reply_error(&self, what: &str) -> Error {
        Error::Driver {
            driver: self.name_of(),
            message: format!("Redis gave an unexpected reply to {what}"),
            temporary: false,
            source: None,
        }
    }

    /// Every member of `set`, read with `SSCAN` so Redis is never blocked for long.
    async fn members(&self, set: &str) -> Result<Vec<Vec<u8>>, Error> {
        let mut cursor = b"0".to_vec();
        let mut members = Vec::new();
        loop {
            let reply = self
                .inner
                .client
                .command(
                    "SSCAN",
                    &[set.as_bytes(), &cursor, b"COUNT", SCAN_COUNT.as_bytes()],
                )
                .await?;
            let mut parts = items(reply).into_iter();
            let (Some(next), Some(Reply::Array(found))) = (parts.next(), parts.next()) else {
                return Err(self.reply_error("SSCAN"));
            };
            members.extend(found.into_iter().filter_map(Reply::into_bytes));
            cursor = next.into_bytes().unwrap_or_default();
            if cursor == b"0" || cursor.is_empty() {
                return Ok(members);
            }
        }
    }

    /// The scheduled messages of the queue of `priority` that are `which` ('due', 'later' or
    /// 'all'), soonest due first, at most `limit` (0: all), removed when `remove`.
    async fn scheduled(
        &self,
        priority: Priority,
        which: &str,
        limit: usize,
        remove: bool,
    ) -> Result<Vec<Vec<u8>>, Error> {
        let keys = [
            self.inner.keys.schedule.as_str(),
            &self.inner.keys.schedule_index,
            &self.inner.keys.legacy_schedule_priorities,
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
        let reply = self
            .inner
            .client
            .eval(Script::Scheduled, &keys, &args)
            .await?;
        Ok(items(reply)
            .into_iter()
            .step_by(2)
            .filter_map(Reply::into_bytes)
            .collect())
    }

    /// The priorities of the queues other than the default one.
    fn other_priorities(&self) -> impl Iterator<Item = String> {
        self.inner
            .sets
            .all()
            .into_iter()
            .map(|(p, _)| p)
            .filter(|p| *p != DEFAULT_PRIORITY)
            .map(|p| p.to_string())
    }

    fn decoded(&self, bodies: &[Vec<u8>]) -> Vec<Message> {
        bodies
            .iter()
            .filter_map(|body| self.inner.serializer.deserialize(body).ok())
            .collect()
    }

    pub(crate) async fn peek_now(
        &self,
        priority: Priority,
        state: QueueState,
        limit: usize,
    ) -> Result<Vec<Message>, Error> {
        let set = self.inner.sets.get(priority)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut messages = match state {
            QueueState::Waiting => {
                let mut messages =
                    self.decoded(&self.scheduled(priority, "due", limit, false).await?);
                let mut bodies = self.members(&set).await?;
                bodies.extend(self.claimed_ahead(&set).into_iter().map(|(_, body)| body));
                messages.extend(self.decoded(&bodies));
                messages.sort_by(|a, b| a.due().total_cmp(&b.due()));
                messages
            }
            QueueState::Delayed => {
                self.decoded(&self.scheduled(priority, "later", limit, false).await?)
            }
            QueueState::InFlight if !self.at_least_once() => {
                return Err(self.without_claims());
            }
            QueueState::InFlight => {
                let claims = self
                    .inner
                    .client
                    .command(
                        "ZRANGE",
                        &[self.inner.keys.in_flight.as_bytes(), b"0", b"-1"],
                    )
                    .await?;
                let ahead: Vec<Vec<u8>> = self
                    .claimed_ahead(&set)
                    .into_iter()
                    .map(|(claim, _)| claim)
                    .collect();
                let bodies: Vec<Vec<u8>> = items(claims)
                    .into_iter()
                    .filter_map(Reply::into_bytes)
                    .filter(|claim| !ahead.contains(claim))
                    .filter_map(|claim| {
                        let bar = claim.iter().position(|b| *b == b'|')?;
                        let head = &claim[..bar];
                        let head = head.split(|b| *b == b':').next().unwrap_or(head);
                        let of = std::str::from_utf8(head).ok()?.parse::<Priority>().ok()?;
                        (self.set_of(of) == set).then(|| claim[bar + 1..].to_vec())
                    })
                    .collect();
                self.decoded(&bodies)
            }
            QueueState::Dead => self
                .stored(priority, limit)
                .await?
                .into_iter()
                .filter_map(|letter| self.inner.serializer.deserialize(&letter.body).ok())
                .collect(),
            _ => return Err(self.unsupported_state()),
        };
        messages.truncate(limit);
        Ok(messages)
    }

    fn unsupported_state(&self) -> Error {
        Error::Unsupported {
            driver: self.name_of(),
            what: "this queue state",
        }
    }

    fn without_claims(&self) -> Error {
        Error::Unsupported {
            driver: self.name_of(),
            what: "listing or purging messages in flight without claims (at-most-once delivery)",
        }
    }

    /// Up to `limit` dead letters of the queue of `priority` (0: all), oldest first.
    async fn stored(&self, priority: Priority, limit: usize) -> Result<Vec<Stored>, Error> {
        let (ids_key, letters_key) = Keys::dead(&self.inner.sets.get(priority)?);
        let stop = match i64::try_from(limit) {
            Ok(limit) if limit > 0 => (limit - 1).to_string(),
            _ => "-1".to_owned(),
        };
        let ids: Vec<Vec<u8>> = items(
            self.inner
                .client
                .command("ZRANGE", &[ids_key.as_bytes(), b"0", stop.as_bytes()])
                .await?,
        )
        .into_iter()
        .filter_map(Reply::into_bytes)
        .collect();
        let mut stored = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(UNBURY_BATCH) {
            let mut args: Vec<&[u8]> = vec![letters_key.as_bytes()];
            args.extend(chunk.iter().map(Vec::as_slice));
            let records = items(self.inner.client.command("HMGET", &args).await?);
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

    pub(crate) async fn dead_letters_now(
        &self,
        priority: Priority,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, Error> {
        if limit == 0 {
            self.inner.sets.get(priority)?;
            return Ok(Vec::new());
        }
        Ok(self
            .stored(priority, limit)
            .await?
            .into_iter()
            .map(|s| self.letter(priority, s).0)
            .collect())
    }

    fn letter(&self, priority: Priority, stored: Stored) -> (DeadLetter, Vec<u8>) {
        let message = self.inner.serializer.deserialize(&stored.body).ok();
        let letter = DeadLetter::new(stored.id, priority, stored.reason).with_message(message);
        (letter, stored.body)
    }

    /// Takes the dead letters `ids` (with the bodies to put back when replaying) out of the
    /// store of the queue of `priority`; returns how many it took.
    async fn unbury(
        &self,
        priority: Priority,
        replay: bool,
        letters: &[(String, Vec<u8>)],
    ) -> Result<u64, Error> {
        let set = self.inner.sets.get(priority)?;
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
            taken += count(&self.inner.client.eval(Script::Unbury, &keys, &args).await?);
        }
        Ok(taken)
    }

    pub(crate) async fn replay_now(
        &self,
        priority: Priority,
        replay: &Replay,
    ) -> Result<u64, Error> {
        let mut back = Vec::new();
        for stored in self.stored(priority, 0).await? {
            let stored_id = stored.id.clone();
            let (letter, body) = self.letter(priority, stored);
            if !replay.selects(&letter) {
                continue;
            }
            let body = match &letter.message {
                Some(message) => self.inner.serializer.serialize(&replay.replayed(message))?,
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

    pub(crate) async fn purge_now(
        &self,
        priority: Priority,
        state: QueueState,
    ) -> Result<Option<u64>, Error> {
        let set = self.inner.sets.get(priority)?;
        let purged = match state {
            QueueState::Waiting => {
                let due = self.scheduled(priority, "due", 0, true).await?.len() as u64;
                let reply = self
                    .inner
                    .client
                    .eval(Script::Purge, &[&set], &[b"set"])
                    .await?;
                due + count(&reply)
            }
            QueueState::Delayed => self.scheduled(priority, "later", 0, true).await?.len() as u64,
            QueueState::InFlight if !self.at_least_once() => {
                return Err(self.without_claims());
            }
            QueueState::InFlight => {
                let mut args = vec![
                    "claims".to_owned(),
                    priority.to_string(),
                    flag(priority == DEFAULT_PRIORITY),
                ];
                args.extend(self.other_priorities());
                let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
                let reply = self
                    .inner
                    .client
                    .eval(Script::Purge, &[&self.inner.keys.in_flight], &args)
                    .await?;
                count(&reply)
            }
            QueueState::Dead => {
                let (ids, letters) = Keys::dead(&set);
                let reply = self
                    .inner
                    .client
                    .eval(Script::Purge, &[&ids, &letters], &[b"dead"])
                    .await?;
                count(&reply)
            }
            _ => return Err(self.unsupported_state()),
        };
        Ok(Some(purged))
    }

    pub(crate) async fn delete_now(&self, priority: Priority, id: &str) -> Result<bool, Error> {
        let set = self.inner.sets.get(priority)?;
        if self
            .unbury(priority, false, &[(id.to_owned(), Vec::new())])
            .await?
            > 0
        {
            return Ok(true);
        }
        // A dead letter listed under its message's id, stored under another.
        let named: Vec<(String, Vec<u8>)> = self
            .stored(priority, 0)
            .await?
            .into_iter()
            .filter(|s| {
                self.inner
                    .serializer
                    .deserialize(&s.body)
                    .is_ok_and(|m| m.id() == id)
            })
            .map(|s| (s.id, Vec::new()))
            .collect();
        if !named.is_empty() && self.unbury(priority, false, &named[..1]).await? > 0 {
            return Ok(true);
        }
        let is_it = |body: &Vec<u8>| {
            self.inner
                .serializer
                .deserialize(body)
                .is_ok_and(|m| m.id() == id)
        };
        for member in self.members(&set).await? {
            if is_it(&member) {
                let reply = self
                    .inner
                    .client
                    .command("SREM", &[set.as_bytes(), &member])
                    .await?;
                if count(&reply) > 0 {
                    return Ok(true);
                }
            }
        }
        for member in self.scheduled(priority, "all", 0, false).await? {
            if is_it(&member) {
                let entry = [priority.to_string().as_bytes(), b"|", &member].concat();
                let keys = &self.inner.keys;
                let removed = self
                    .inner
                    .client
                    .command("ZREM", &[keys.schedule.as_bytes(), &member])
                    .await?;
                self.inner
                    .client
                    .command("ZREM", &[keys.schedule_index.as_bytes(), &entry])
                    .await?;
                if count(&removed) > 0 {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_holds_the_reason_and_the_body_as_it_was() {
        let reason = DeadReason::new(hermes_core::inspect::DeadKind::Failed, "line one\nline two")
            .with_handler("Archiver")
            .with_retries(2);
        let body = b"{\"not\":\n\"json\xff";
        let stored = record(&reason, body);
        let (read, read_body) = parse_record(&stored);
        assert_eq!(read, reason);
        assert_eq!(read_body, body);
        let (unknown, whole) = parse_record(b"garbage");
        assert_eq!(unknown.kind, hermes_core::inspect::DeadKind::Undecodable);
        assert_eq!(whole, b"garbage");
    }
}
