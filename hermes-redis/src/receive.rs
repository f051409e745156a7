//! Receiving: the claim script that takes messages (and promotes due ones, and returns expired
//! claims), the messages it claimed ahead, waiting in this process's buffer for a `receive` for
//! at most half the visibility timeout, a taken message turned into a delivery, and idle
//! receives waiting for a wake-up.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use hermes_core::driver::{Delivery, Receipt};
use hermes_core::inspect::{DeadKind, DeadReason};
use hermes_core::time::{poll, unix_now};
use hermes_core::{DEFAULT_PRIORITY, Error, Priority};

use crate::client::Reply;
use crate::core::{Core, RedisReceipt, Taken};
use crate::naming::Keys;
use crate::scripts::Script;

impl Core {
    pub(crate) async fn receive(
        self: &Arc<Self>,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        self.sets.marked(priorities)?;
        if !self.wakes.listens() {
            return poll(wait, self.options.refresh_interval, || {
                self.take_one(priorities)
            })
            .await;
        }
        let give_up = tokio::time::Instant::now() + wait;
        let mut round = self.wakes.round();
        loop {
            // A claim that found nothing, with no round since, needs no second one: the next
            // round comes with the next send, due message or refresh.
            let found = if self.wakes.quiet() {
                self.take_buffered_one(priorities).await?
            } else {
                self.take_one(priorities).await?
            };
            if let Some(delivery) = found {
                return Ok(Some(delivery));
            }
            let now = tokio::time::Instant::now();
            if now >= give_up {
                return Ok(None);
            }
            let _waiting = self.wakes.wait_here();
            crate::keyspace::follow_keyspace(&self.wakes);
            // The listener starts a round at least every refresh interval; should it stop
            // doing so, the receive still looks again.
            let fallback = self.options.refresh_interval * 2;
            // A delayed message learned of from a keyspace event came after the listener began
            // its wait, which may end later than the message is due: claim when it is due.
            let due = if self.wakes.follows_keyspace() {
                self.wakes.until_next_due()
            } else {
                None
            };
            let wait = (give_up - now)
                .min(fallback)
                .min(due.unwrap_or(Duration::MAX));
            let ended = tokio::time::timeout(wait, round.changed()).await;
            if ended.is_err() && due.is_some_and(|due| wait >= due) {
                self.wakes.wake_receives();
            }
        }
    }

    /// A message of `priorities` from the buffer alone.
    async fn take_buffered_one(
        self: &Arc<Self>,
        priorities: &[Priority],
    ) -> Result<Option<Delivery>, Error> {
        while let Some(taken) = self.take_buffered(priorities) {
            if let Some(delivery) = self.deliver(taken).await? {
                return Ok(Some(delivery));
            }
        }
        Ok(None)
    }

    /// A message of `priorities` from the buffer, or from a claim; `None` when the sets have
    /// none now.
    async fn take_one(
        self: &Arc<Self>,
        priorities: &[Priority],
    ) -> Result<Option<Delivery>, Error> {
        loop {
            if let Some(taken) = self.take_buffered(priorities) {
                match self.deliver(taken).await? {
                    Some(delivery) => return Ok(Some(delivery)),
                    None => continue,
                }
            }
            if self.fetch(priorities).await? == 0 {
                return Ok(None);
            }
        }
    }

    /// Claims messages into the buffer; returns how many arrived. The claim runs in a task of
    /// its own, so a dropped `receive` loses nothing: what it claimed waits in the buffer.
    async fn fetch(self: &Arc<Self>, priorities: &[Priority]) -> Result<usize, Error> {
        let _one_at_a_time = self.fetching.lock().await;
        let waiting = self
            .buffer()
            .iter()
            .filter(|c| priorities.is_empty() || priorities.contains(&c.priority))
            .count();
        if waiting > 0 {
            return Ok(waiting);
        }
        let core = self.clone();
        let priorities = priorities.to_vec();
        hermes_core::driver::task::detached(async move { core.claim(&priorities).await }).await
    }

    /// Runs the claim script on the sets of `priorities`, sending the deferred acknowledgements
    /// with it, and adds what it took to the buffer; returns how many messages it took.
    async fn claim(self: &Arc<Self>, priorities: &[Priority]) -> Result<usize, Error> {
        let sets = self.sets.marked(priorities)?;
        let (visibility, max) = if self.at_least_once() {
            (
                self.options.visibility_timeout.as_secs_f64(),
                self.options.prefetch.max(1),
            )
        } else {
            (0.0, 1)
        };
        let default_index = sets
            .iter()
            .position(|(p, _, _)| *p == DEFAULT_PRIORITY)
            .map_or(1, |i| i + 1);
        let mut keys: Vec<&str> = vec![
            &self.keys.schedule,
            &self.keys.schedule_index,
            &self.keys.legacy_schedule_priorities,
            &self.keys.in_flight,
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
        let round = self.wakes.round_now();
        // Only a claim that looked at every set tells that none has a message.
        let partial = sets.iter().any(|(_, _, taken)| !*taken);
        let mut args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        args.extend(acked.iter().map(Vec::as_slice));
        let reply = match self.client.eval(Script::Claim, &keys, &args).await {
            Ok(reply) => reply,
            Err(e) => {
                self.defer_acks(acked);
                return Err(e);
            }
        };
        let Reply::Array(items) = reply else {
            self.wakes.claimed(round, partial, None);
            return Ok(0);
        };
        if let [due] = items.as_slice() {
            // Nothing taken: the due time of the earliest delayed message.
            let next_due = due
                .clone()
                .into_bytes()
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|t| t.parse::<f64>().ok());
            self.wakes.claimed(round, partial, next_due);
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
        self.wakes.claimed(round, partial || count > 0, None);
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
    async fn deliver(&self, taken: Taken) -> Result<Option<Delivery>, Error> {
        match self.serializer.deserialize(taken.body()) {
            Ok(message) if !message.is_due_at(unix_now()) => {
                self.schedule(
                    message.due(),
                    taken.body(),
                    taken.priority,
                    taken.claim(),
                    false,
                )
                .await?;
                Ok(None)
            }
            Ok(message) => {
                // Handed out within the hold limit, so at least half the visibility timeout
                // of the claim is left.
                let lease = self
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

    /// How long a message claimed ahead may wait in the buffer: half the visibility timeout,
    /// so a handler that gets it has at least that much of its claim left.
    fn hold_limit(&self) -> Duration {
        self.options.visibility_timeout / 2
    }

    /// Takes the buffered messages held for the hold limit or longer out of the buffer. The
    /// buffer is in claim order, so they are at its front.
    fn take_stale(&self) -> Vec<Taken> {
        let limit = self.hold_limit();
        let mut buffer = self.buffer();
        let mut stale = Vec::new();
        while buffer.front().is_some_and(|t| t.at.elapsed() >= limit) {
            stale.extend(buffer.pop_front());
        }
        stale
    }

    /// Gives back `stale` messages in a task of its own. A claim that expired meanwhile is
    /// left alone (its token no longer matches), so a message another worker took runs once.
    fn return_in_background(self: &Arc<Self>, stale: Vec<Taken>) {
        if stale.is_empty() {
            return;
        }
        let core = self.clone();
        tokio::spawn(async move {
            let _ = core.give_back_all(&stale).await;
        });
    }

    /// Takes the first buffered message of `priorities`. Messages held for the hold limit are
    /// given back instead of handed out.
    fn take_buffered(self: &Arc<Self>, priorities: &[Priority]) -> Option<Taken> {
        let stale = self.take_stale();
        self.return_in_background(stale);
        let mut buffer = self.buffer();
        let index = buffer
            .iter()
            .position(|c| priorities.is_empty() || priorities.contains(&c.priority));
        index.and_then(|i| buffer.remove(i))
    }

    /// Starts, once, the task that gives back buffered messages when they reach the hold
    /// limit, even when no `receive` comes (the worker's handlers are all busy). It holds the
    /// driver weakly and ends with it.
    fn start_buffer_sweeper(self: &Arc<Self>) {
        if self.sweeper.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak: Weak<Core> = Arc::downgrade(self);
        let limit = self.hold_limit();
        tokio::spawn(async move {
            // Lets a later claim start another sweeper when this one's runtime shuts down.
            let _running = SweeperRunning(weak.clone());
            loop {
                let Some(core) = weak.upgrade() else { return };
                let _ = core.give_back_all(&core.take_stale()).await;
                // The buffer is in claim order: its front reaches the limit first.
                let next = core
                    .buffer()
                    .front()
                    .map_or(limit, |t| limit.saturating_sub(t.at.elapsed()));
                drop(core);
                tokio::time::sleep(next.max(Duration::from_millis(10))).await;
            }
        });
    }
}

/// Clears [`Core::sweeper`] when the sweeper task ends or is dropped.
struct SweeperRunning(Weak<Core>);

impl Drop for SweeperRunning {
    fn drop(&mut self) {
        if let Some(core) = self.0.upgrade() {
            core.sweeper.store(false, Ordering::Release);
        }
    }
}
