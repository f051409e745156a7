//! The memory driver's inspection: figures, peeks, purges, deletes and dead letters, all exact.

use std::sync::Arc;
use std::time::Duration;

use hermes_core::driver::{Browse, DeadLetters, Delivery, Inspect, async_trait};
use hermes_core::inspect::{
    DeadLetter, DeadReason, Figure, QueueState, QueueStats, Replay, Retention,
};
use hermes_core::time::unix_now;
use hermes_core::{Error, Message, Priority};

use super::{LeaseId, MemoryDriver, NAME, State};

/// A dead letter as the memory driver keeps it: the body as it was on the queue.
#[derive(Debug)]
pub(super) struct Dead {
    pub(super) id: String,
    pub(super) priority: Priority,
    pub(super) body: Arc<[u8]>,
    /// `None` for an undecodable body.
    pub(super) message: Option<Message>,
    pub(super) reason: DeadReason,
}

impl Dead {
    fn letter(&self) -> DeadLetter {
        DeadLetter::new(self.id.clone(), self.priority, self.reason.clone())
            .with_message(self.message.clone())
    }
}

impl State {
    /// Keeps `dead`, then drops the oldest dead letters of its queue beyond `retention`.
    pub(super) fn bury(&mut self, dead: Dead, retention: &Retention) {
        let priority = dead.priority;
        self.dead.push_back(dead);
        let oldest_kept = unix_now() - retention.max_age.as_secs_f64();
        self.dead
            .retain(|d| d.priority != priority || d.reason.at >= oldest_kept);
        let mut excess = self
            .dead
            .iter()
            .filter(|d| d.priority == priority)
            .count()
            .saturating_sub(retention.max_count);
        self.dead.retain(|d| {
            if excess > 0 && d.priority == priority {
                excess -= 1;
                return false;
            }
            true
        });
    }

    fn check_priority(&self, priority: Priority) -> Result<(), Error> {
        self.check_filter(&[priority])
    }
}

#[async_trait]
impl Inspect for MemoryDriver {
    async fn stats(&self) -> Result<Vec<QueueStats>, Error> {
        let mut state = self.lock();
        let now = unix_now();
        state.promote_due(now);
        let state = &*state;
        Ok(state
            .queues
            .iter()
            .rev()
            .map(|(priority, queue)| {
                let oldest_due = queue
                    .ready
                    .iter()
                    .filter_map(|body| self.serializer.deserialize(body).ok())
                    .map(|m| m.due())
                    .reduce(f64::min);
                let latency = oldest_due.map_or(Duration::ZERO, |due| {
                    Duration::from_secs_f64((now - due).max(0.0))
                });
                let exact = |n: usize| Figure::Exact(n as u64);
                let mut stats = QueueStats::unknown(queue.name.clone(), *priority);
                stats.waiting = exact(queue.ready.len());
                stats.delayed = exact(
                    state
                        .scheduled
                        .values()
                        .filter(|s| s.priority == *priority)
                        .count(),
                );
                stats.in_flight = exact(
                    state
                        .in_flight
                        .values()
                        .filter(|l| l.priority == *priority)
                        .count(),
                );
                stats.dead = exact(
                    state
                        .dead
                        .iter()
                        .filter(|d| d.priority == *priority)
                        .count(),
                );
                stats.latency = Figure::Exact(latency);
                stats
            })
            .collect())
    }

    async fn purge(
        &self,
        priority: Priority,
        queue_state: QueueState,
    ) -> Result<Option<u64>, Error> {
        self.purge_state(priority, queue_state).map(Some)
    }
}

#[async_trait]
impl Browse for MemoryDriver {
    async fn peek(
        &self,
        priority: Priority,
        queue_state: QueueState,
        limit: usize,
    ) -> Result<Vec<Message>, Error> {
        let mut state = self.lock();
        state.check_priority(priority)?;
        state.promote_due(unix_now());
        let bodies: Vec<Arc<[u8]>> = match queue_state {
            QueueState::Waiting => state.queues[&priority].ready.iter().cloned().collect(),
            QueueState::Delayed => state
                .scheduled
                .values()
                .filter(|s| s.priority == priority)
                .map(|s| s.body.clone())
                .collect(),
            QueueState::InFlight => {
                let mut leases: Vec<_> = state
                    .in_flight
                    .iter()
                    .filter(|(_, l)| l.priority == priority)
                    .collect();
                leases.sort_by_key(|(id, _)| **id);
                leases.into_iter().map(|(_, l)| l.body.clone()).collect()
            }
            QueueState::Dead => state
                .dead
                .iter()
                .filter(|d| d.priority == priority && d.message.is_some())
                .map(|d| d.body.clone())
                .collect(),
            _ => return Err(self.unsupported_state(queue_state)),
        };
        Ok(bodies
            .iter()
            .filter_map(|body| self.serializer.deserialize(body).ok())
            .take(limit)
            .collect())
    }

    async fn delete(&self, priority: Priority, id: &str) -> Result<bool, Error> {
        let mut state = self.lock();
        state.check_priority(priority)?;
        let state = &mut *state;
        let is_it = |body: &Arc<[u8]>| {
            self.serializer
                .deserialize(body)
                .is_ok_and(|m| m.id() == id)
        };
        let ready = &mut state.queues.get_mut(&priority).expect("checked").ready;
        if let Some(at) = ready.iter().position(is_it) {
            ready.remove(at);
            return Ok(true);
        }
        let scheduled = state
            .scheduled
            .iter()
            .find(|(_, s)| s.priority == priority && is_it(&s.body))
            .map(|(key, _)| *key);
        if let Some(key) = scheduled {
            state.scheduled.remove(&key);
            return Ok(true);
        }
        if let Some(at) = state
            .dead
            .iter()
            .position(|d| d.priority == priority && d.id == id)
        {
            state.dead.remove(at);
            return Ok(true);
        }
        Ok(false)
    }
}

#[async_trait]
impl DeadLetters for MemoryDriver {
    async fn add(&self, delivery: &Delivery, reason: &DeadReason) -> Result<(), Error> {
        let LeaseId(id) = *delivery.receipt().downcast::<LeaseId>(NAME)?;
        self.bury_delivery(id, delivery, reason);
        Ok(())
    }

    async fn list(&self, priority: Priority, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        let state = self.lock();
        state.check_priority(priority)?;
        Ok(state
            .dead
            .iter()
            .filter(|d| d.priority == priority)
            .take(limit)
            .map(Dead::letter)
            .collect())
    }

    async fn replay(&self, priority: Priority, replay: &Replay) -> Result<u64, Error> {
        let mut state = self.lock();
        state.check_priority(priority)?;
        let mut back = Vec::new();
        let mut kept = std::collections::VecDeque::new();
        for dead in std::mem::take(&mut state.dead) {
            if dead.priority == priority && replay.selects(&dead.letter()) {
                back.push(dead);
            } else {
                kept.push_back(dead);
            }
        }
        state.dead = kept;
        let mut replayed = 0;
        for dead in back {
            let body: Arc<[u8]> = match &dead.message {
                Some(message) => self.serializer.serialize(&replay.replayed(message))?.into(),
                None => dead.body,
            };
            let queue = state.queues.get_mut(&priority).expect("checked");
            queue.ready.push_back(body);
            replayed += 1;
        }
        drop(state);
        self.shared.notify.notify_waiters();
        Ok(replayed)
    }
}

impl MemoryDriver {
    /// Moves the claim `lease` to the dead letters. A claim that already expired has no effect
    /// (the redelivered copy is someone else's).
    fn bury_delivery(&self, lease: u64, delivery: &Delivery, reason: &DeadReason) {
        let mut state = self.lock();
        let Some(held) = state.in_flight.remove(&lease) else {
            return;
        };
        state.deadlines.remove(&(held.deadline, lease));
        let dead = Dead {
            id: delivery.message().id().to_owned(),
            priority: held.priority,
            body: held.body,
            message: Some(delivery.message().clone()),
            reason: reason.clone(),
        };
        state.bury(dead, &self.shared.options.retention);
    }

    fn purge_state(&self, priority: Priority, queue_state: QueueState) -> Result<u64, Error> {
        let mut state = self.lock();
        state.check_priority(priority)?;
        let state = &mut *state;
        let purged = match queue_state {
            QueueState::Waiting => {
                let ready = &mut state.queues.get_mut(&priority).expect("checked").ready;
                let n = ready.len();
                ready.clear();
                n
            }
            QueueState::Delayed => {
                let before = state.scheduled.len();
                state.scheduled.retain(|_, s| s.priority != priority);
                before - state.scheduled.len()
            }
            QueueState::InFlight => {
                let ids: Vec<u64> = state
                    .in_flight
                    .iter()
                    .filter(|(_, l)| l.priority == priority)
                    .map(|(id, _)| *id)
                    .collect();
                for id in &ids {
                    if let Some(lease) = state.in_flight.remove(id) {
                        state.deadlines.remove(&(lease.deadline, *id));
                    }
                }
                ids.len()
            }
            QueueState::Dead => {
                let before = state.dead.len();
                state.dead.retain(|d| d.priority != priority);
                before - state.dead.len()
            }
            _ => return Err(self.unsupported_state(queue_state)),
        };
        Ok(purged as u64)
    }

    fn unsupported_state(&self, _: QueueState) -> Error {
        Error::Unsupported {
            driver: super::NAME,
            what: "this queue state",
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use hermes_core::driver::{Browse, DeadLetters, Inspect};
    use hermes_core::inspect::{DeadKind, DeadReason, QueueState, Replay};
    use hermes_core::{DEFAULT_PRIORITY, Driver, Message};

    use crate::{MemoryDriver, MemoryOptions};

    async fn bury(driver: &MemoryDriver, id: &str, at: f64) {
        let message = Message::builder("t").id(id).build().unwrap();
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
        let delivery = driver.receive(&[], Duration::ZERO).await.unwrap().unwrap();
        let mut reason = DeadReason::new(DeadKind::Failed, "no");
        reason.at = at;
        driver.add(&delivery, &reason).await.unwrap();
    }

    #[tokio::test]
    async fn retention_drops_the_oldest_beyond_the_count_and_those_past_the_age() {
        let mut options = MemoryOptions::default();
        options.retention.max_count = 2;
        options.retention.max_age = Duration::from_secs(3600);
        let driver = MemoryDriver::with_options(options).unwrap();
        let now = hermes_core::time::unix_now();
        bury(&driver, "ancient", now - 7200.0).await;
        bury(&driver, "a", now).await;
        bury(&driver, "b", now).await;
        bury(&driver, "c", now).await;
        let ids: Vec<_> = driver
            .list(DEFAULT_PRIORITY, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|l| l.id)
            .collect();
        assert_eq!(ids, ["b", "c"]);
    }

    #[tokio::test]
    async fn an_undecodable_body_replays_as_its_bytes() {
        let driver = MemoryDriver::new();
        driver.push_raw(DEFAULT_PRIORITY, b"garbage").unwrap();
        assert!(driver.receive(&[], Duration::ZERO).await.is_err());
        let letters = driver.list(DEFAULT_PRIORITY, 10).await.unwrap();
        assert_eq!(letters[0].reason.kind, DeadKind::Undecodable);
        assert_eq!(
            driver
                .replay(DEFAULT_PRIORITY, &Replay::ids([letters[0].id.clone()]))
                .await
                .unwrap(),
            1
        );
        assert!(driver.list(DEFAULT_PRIORITY, 10).await.unwrap().is_empty());
        let waiting = driver.stats().await.unwrap()[0].waiting;
        assert_eq!(
            waiting,
            hermes_core::inspect::Figure::Exact(1),
            "back as it was"
        );
        assert!(
            driver.receive(&[], Duration::ZERO).await.is_err(),
            "still garbage"
        );
        assert_eq!(driver.quarantined(), [b"garbage".to_vec()]);
        let none = driver
            .peek(DEFAULT_PRIORITY, QueueState::Dead, 10)
            .await
            .unwrap();
        assert!(
            none.is_empty(),
            "an undecodable body has no message to peek"
        );
    }
}
