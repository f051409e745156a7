//! The figures of the queues, exact, counted by one script; peeks, purges of each state and
//! deletes by id, reading the sets with `SSCAN`.

use std::time::Duration;

use hermes_core::driver::{Browse, Inspect, async_trait};
use hermes_core::inspect::{Figure, Page, PageRequest, QueueState, QueueStats, peeked_page};
use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Error, Message, Priority};

use crate::client::Reply;
use crate::core::{Core, flag};
use crate::naming::Keys;
use crate::scripts::Script;

/// The largest set whose latency is read: the due time of every member is looked at. A larger
/// set's latency is [`Figure::Unknown`].
pub const LATENCY_SCAN_LIMIT: u64 = 1_000;

/// How many members one `SSCAN` asks for.
const SCAN_COUNT: &str = "500";

#[async_trait]
impl Inspect for Core {
    async fn stats(&self) -> Result<Vec<QueueStats>, Error> {
        let queues = self.sets.all();
        let dead: Vec<String> = queues.iter().map(|(_, set)| Keys::dead(set).0).collect();
        let mut keys: Vec<&str> = vec![
            &self.keys.schedule,
            &self.keys.schedule_index,
            &self.keys.legacy_schedule_priorities,
            &self.keys.in_flight,
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
        let reply = self
            .client
            .eval(Script::Stats, &keys, &args)
            .await?
            .into_items();
        let mut stats = Vec::with_capacity(queues.len());
        for ((priority, set), figures) in queues.iter().zip(reply.chunks(6)) {
            let [members, due, later, flight, dead, oldest] = figures else {
                return Err(self.reply_error("the stats script"));
            };
            let ahead = self.claimed_ahead(set);
            let members = members.count();
            let waiting = members + due.count() + ahead.len() as u64;
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
                    .filter_map(|body| self.serializer.deserialize(body).ok())
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
            queue.delayed = Figure::Exact(later.count());
            queue.in_flight = if self.at_least_once() {
                Figure::Exact(flight.count().saturating_sub(ahead.len() as u64))
            } else {
                // Taken messages leave Redis at once: nothing tells how many are handled.
                Figure::Unknown
            };
            queue.dead = Figure::Exact(dead.count());
            queue.latency = latency;
            stats.push(queue);
        }
        Ok(stats)
    }

    async fn purge(&self, priority: Priority, state: QueueState) -> Result<Option<u64>, Error> {
        let set = self.sets.get(priority)?;
        let purged = match state {
            QueueState::Waiting => {
                let due = self.scheduled(priority, "due", 0, true).await?.len() as u64;
                let reply = self.client.eval(Script::Purge, &[&set], &[b"set"]).await?;
                due + reply.count()
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
                self.client
                    .eval(Script::Purge, &[&self.keys.in_flight], &args)
                    .await?
                    .count()
            }
            QueueState::Dead => {
                let (ids, letters) = Keys::dead(&set);
                self.client
                    .eval(Script::Purge, &[&ids, &letters], &[b"dead"])
                    .await?
                    .count()
            }
            _ => return Err(self.unsupported_state()),
        };
        Ok(Some(purged))
    }
}

#[async_trait]
impl Browse for Core {
    async fn peek(
        &self,
        priority: Priority,
        state: QueueState,
        limit: usize,
    ) -> Result<Vec<Message>, Error> {
        let set = self.sets.get(priority)?;
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
                    .client
                    .command("ZRANGE", &[self.keys.in_flight.as_bytes(), b"0", b"-1"])
                    .await?;
                let ahead: Vec<Vec<u8>> = self
                    .claimed_ahead(&set)
                    .into_iter()
                    .map(|(claim, _)| claim)
                    .collect();
                let bodies: Vec<Vec<u8>> = claims
                    .into_items()
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
                .filter_map(|letter| self.serializer.deserialize(&letter.body).ok())
                .collect(),
            _ => return Err(self.unsupported_state()),
        };
        messages.truncate(limit);
        Ok(messages)
    }

    async fn page(&self, priority: Priority, request: &PageRequest) -> Result<Page, Error> {
        match request.state {
            QueueState::Waiting => self.waiting_page(priority, request).await,
            _ => peeked_page(self, priority, request).await,
        }
    }

    async fn delete(&self, priority: Priority, id: &str) -> Result<bool, Error> {
        let set = self.sets.get(priority)?;
        if self
            .unbury(priority, false, &[(id.to_owned(), Vec::new())])
            .await?
            > 0
        {
            return Ok(true);
        }
        let is_it = |body: &Vec<u8>| {
            self.serializer
                .deserialize(body)
                .is_ok_and(|m| m.id() == id)
        };
        // A dead letter listed under its message's id, stored under another.
        let named: Vec<(String, Vec<u8>)> = self
            .stored(priority, 0)
            .await?
            .into_iter()
            .filter(|s| is_it(&s.body))
            .map(|s| (s.id, Vec::new()))
            .collect();
        if !named.is_empty() && self.unbury(priority, false, &named[..1]).await? > 0 {
            return Ok(true);
        }
        for member in self.members(&set).await? {
            if is_it(&member) {
                let reply = self
                    .client
                    .command("SREM", &[set.as_bytes(), &member])
                    .await?;
                if reply.count() > 0 {
                    return Ok(true);
                }
            }
        }
        for member in self.scheduled(priority, "all", 0, false).await? {
            if is_it(&member) {
                let entry = [priority.to_string().as_bytes(), b"|", &member].concat();
                let keys = &self.keys;
                let removed = self
                    .client
                    .command("ZREM", &[keys.schedule.as_bytes(), &member])
                    .await?;
                self.client
                    .command("ZREM", &[keys.schedule_index.as_bytes(), &entry])
                    .await?;
                if removed.count() > 0 {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

impl Core {
    /// The claims and bodies of the messages of the queue whose set is `set` that this process
    /// claimed ahead and no handler has yet: for the queue they are waiting, not in flight.
    fn claimed_ahead(&self, set: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.buffer()
            .iter()
            .filter(|t| t.claimed && *self.set_of(t.priority) == *set)
            .map(|t| (t.claim().to_vec(), t.body().to_vec()))
            .collect()
    }

    /// Every member of `set`, read with `SSCAN` so Redis is never blocked for long.
    async fn members(&self, set: &str) -> Result<Vec<Vec<u8>>, Error> {
        let mut cursor = b"0".to_vec();
        let mut members = Vec::new();
        loop {
            let reply = self
                .client
                .command(
                    "SSCAN",
                    &[set.as_bytes(), &cursor, b"COUNT", SCAN_COUNT.as_bytes()],
                )
                .await?;
            let mut parts = reply.into_items().into_iter();
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

    /// The bodies of the messages of the queue whose set is `set` this process claimed ahead.
    pub(crate) fn ahead_bodies(&self, set: &str) -> Vec<Vec<u8>> {
        self.claimed_ahead(set)
            .into_iter()
            .map(|(_, body)| body)
            .collect()
    }

    /// The messages of `bodies` that decode.
    pub(crate) fn decoded(&self, bodies: &[Vec<u8>]) -> Vec<Message> {
        bodies
            .iter()
            .filter_map(|body| self.serializer.deserialize(body).ok())
            .collect()
    }

    pub(crate) fn reply_error(&self, what: &str) -> Error {
        Error::Driver {
            driver: self.name(),
            message: format!("Redis gave an unexpected reply to {what}"),
            temporary: false,
            source: None,
        }
    }

    fn unsupported_state(&self) -> Error {
        Error::Unsupported {
            driver: self.name(),
            what: "this queue state",
        }
    }

    fn without_claims(&self) -> Error {
        Error::Unsupported {
            driver: self.name(),
            what: "listing or purging messages in flight without claims (at-most-once delivery)",
        }
    }
}
