//! Claims: the claim script that takes messages (and promotes due ones, and returns expired
//! claims), what it took, a taken message turned into a delivery, and a claim given back.

use std::sync::Arc;
use std::time::Instant;

use hermes_core::driver::{Delivery, Receipt};
use hermes_core::inspect::{DeadKind, DeadReason};
use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Error, Priority};

use crate::client::Reply;
use crate::driver::RedisSetDriver;
use crate::naming::Keys;
use crate::scripts::Script;

/// A message taken from a set: its priority and the message as stored, and in at-least-once
/// mode its claim, the member `<priority>:<token>|<message>` of the in-flight set.
#[derive(Debug)]
pub(crate) struct Taken {
    pub(crate) priority: Priority,
    /// The claim member; in at-most-once mode, the message alone.
    member: Vec<u8>,
    /// Where the message starts in `member`.
    body_at: usize,
    pub(crate) claimed: bool,
    /// When it was claimed.
    pub(crate) at: Instant,
}

impl Taken {
    /// A message taken as `member`: its claim (`<priority>:<token>|<message>`) when `claimed`,
    /// else the message itself.
    fn new(priority: Priority, member: Vec<u8>, claimed: bool, at: Instant) -> Self {
        let body_at = if claimed {
            member
                .iter()
                .position(|b| *b == b'|')
                .map_or(0, |bar| bar + 1)
        } else {
            0
        };
        Taken {
            priority,
            member,
            body_at,
            claimed,
            at,
        }
    }

    /// The message as stored.
    pub(crate) fn body(&self) -> &[u8] {
        &self.member[self.body_at..]
    }

    /// The claim member, or nothing when the message was taken without a claim.
    pub(crate) fn claim(&self) -> &[u8] {
        if self.claimed { &self.member } else { &[] }
    }
}

/// A delivered message: what was taken.
#[derive(Debug)]
pub(crate) struct RedisReceipt(pub(crate) Taken);

impl RedisSetDriver {
    /// Claims messages into the buffer; returns how many arrived. The claim runs in a task of
    /// its own, so a dropped `receive` loses nothing: what it claimed waits in the buffer.
    pub(crate) async fn fetch(&self, priorities: &[Priority]) -> Result<usize, Error> {
        let _one_at_a_time = self.inner.fetching.lock().await;
        let waiting = self
            .buffer()
            .iter()
            .filter(|c| priorities.is_empty() || priorities.contains(&c.priority))
            .count();
        if waiting > 0 {
            return Ok(waiting);
        }
        let driver = self.clone();
        let priorities = priorities.to_vec();
        hermes_core::driver::task::detached(async move { driver.claim(&priorities).await }).await
    }

    /// Runs the claim script on the sets of `priorities`, sending the deferred acknowledgements
    /// with it, and adds what it took to the buffer; returns how many messages it took.
    async fn claim(&self, priorities: &[Priority]) -> Result<usize, Error> {
        let inner = &self.inner;
        let sets = self.inner.sets.marked(priorities)?;
        let (visibility, max) = if self.at_least_once() {
            (
                inner.options.visibility_timeout.as_secs_f64(),
                inner.options.prefetch.max(1),
            )
        } else {
            (0.0, 1)
        };
        let default_index = sets
            .iter()
            .position(|(p, _, _)| *p == DEFAULT_PRIORITY)
            .map_or(1, |i| i + 1);
        let mut keys: Vec<&str> = vec![
            &inner.keys.schedule,
            &inner.keys.schedule_index,
            &inner.keys.legacy_schedule_priorities,
            &inner.keys.in_flight,
        ];
        keys.extend(sets.iter().map(|(_, key, _)| &**key));
        let mut args: Vec<String> = vec![
            unix_now().to_string(),
            visibility.to_string(),
            max.to_string(),
            sets.len().to_string(),
        ];
        args.extend(sets.iter().map(|(p, _, _)| p.to_string()));
        args.extend(
            sets.iter()
                .map(|(_, _, taken)| if *taken { "1" } else { "0" }.to_owned()),
        );
        args.push(default_index.to_string());
        args.push(format!("{:016x}", rand::random::<u64>()));
        let acked = self.take_acked();
        let round = self.inner.wakes.round_now();
        // Only a claim that looked at every set tells that none has a message.
        let partial = sets.iter().any(|(_, _, taken)| !*taken);
        let mut args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        args.extend(acked.iter().map(Vec::as_slice));
        let reply = match inner.client.eval(Script::Claim, &keys, &args).await {
            Ok(reply) => reply,
            Err(e) => {
                self.defer_acks(acked);
                return Err(e);
            }
        };
        let Reply::Array(items) = reply else {
            self.inner.wakes.claimed(round, partial, None);
            return Ok(0);
        };
        if let [due] = items.as_slice() {
            // Nothing taken: the due time of the earliest delayed message.
            let next_due = due
                .clone()
                .into_bytes()
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|t| t.parse::<f64>().ok());
            self.inner.wakes.claimed(round, partial, next_due);
            return Ok(0);
        }
        let at_least_once = self.at_least_once();
        let now = Instant::now();
        let mut taken = Vec::with_capacity(items.len() / 2);
        let mut items = items.into_iter();
        while let (Some(priority), Some(member)) = (items.next(), items.next()) {
            let priority = priority
                .as_int()
                .and_then(|p| Priority::try_from(p).ok())
                .unwrap_or(DEFAULT_PRIORITY);
            let member = member.into_bytes().unwrap_or_default();
            taken.push(Taken::new(priority, member, at_least_once, now));
        }
        let count = taken.len();
        self.buffer().extend(taken);
        self.inner.wakes.claimed(round, partial || count > 0, None);
        if count >= max {
            // More may be waiting: the next idle worker looks too.
            self.wake_workers();
        }
        if at_least_once && count > 0 {
            self.start_buffer_sweeper();
        }
        Ok(count)
    }

    /// Decodes a taken message, or quarantines it. `Ok(None)` when it is not due yet: it was
    /// put in its set directly, ahead of its `execute_at`, and now waits in the schedule.
    pub(crate) async fn deliver(&self, taken: Taken) -> Result<Option<Delivery>, Error> {
        match self.inner.serializer.deserialize(taken.body()) {
            Ok(message) if !message.is_due_at(unix_now()) => {
                self.schedule(message.due(), taken.body(), taken.priority, taken.claim())
                    .await?;
                Ok(None)
            }
            Ok(message) => {
                // Handed out within the hold limit, so at least half the visibility timeout
                // of the claim is left.
                let lease = self
                    .inner
                    .options
                    .visibility_timeout
                    .saturating_sub(taken.at.elapsed());
                let claimed = taken.claimed;
                let delivery =
                    Delivery::new(message, taken.priority, Receipt::new(RedisReceipt(taken)));
                Ok(Some(if claimed {
                    delivery.with_lease(lease)
                } else {
                    delivery
                }))
            }
            Err(source) => {
                let reason = DeadReason::new(DeadKind::Undecodable, source.to_string());
                let id = format!("undecodable-{:016x}", rand::random::<u64>());
                self.bury(&taken, &id, &reason).await?;
                let (_, letters) = Keys::dead(&self.set_of(taken.priority));
                Err(Error::Undecodable {
                    quarantine: format!("the dead letters of the Redis hash {letters}"),
                    source,
                })
            }
        }
    }

    /// The set of `priority`, or the default set when it has none any more.
    pub(crate) fn set_of(&self, priority: Priority) -> Arc<str> {
        self.inner
            .sets
            .get_or(priority, DEFAULT_PRIORITY)
            .unwrap_or_else(|| self.inner.keys.default_set.as_str().into())
    }

    /// Gives back every one of `taken`; the first error, if any, after trying all.
    pub(crate) async fn give_back_all(&self, taken: &[Taken]) -> Result<(), Error> {
        let mut result = Ok(());
        for t in taken {
            if let Err(e) = self.give_back(t).await {
                result = result.and(Err(e));
            }
        }
        result
    }

    /// Puts a message back in its set; a claimed one only while its claim lasts.
    pub(crate) async fn give_back(&self, taken: &Taken) -> Result<(), Error> {
        let set = self.set_of(taken.priority);
        if taken.claimed {
            let keys = [self.inner.keys.in_flight.as_str(), &set];
            self.inner
                .client
                .eval(Script::Nack, &keys, &[taken.claim()])
                .await?;
        } else {
            self.inner
                .client
                .command("SADD", &[set.as_bytes(), taken.body()])
                .await?;
        }
        Ok(())
    }
}
