//! Receiving: a claim takes up to [`prefetch`](crate::PostgresOptions::prefetch) due rows of
//! the selected queues, highest priority first, in due order, leases them, and removes the
//! deferred acknowledgements in the same call; the rows wait in this process's buffer for a
//! `receive`, at most half the visibility timeout. An idle worker waits for a notification, the
//! next due time or the refresh interval, whichever comes first.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use hermes_core::driver::{Delivery, Receipt};
use hermes_core::inspect::{DeadKind, DeadReason};
use hermes_core::time::unix_now;
use hermes_core::{Error, Priority};
use tokio::time::Instant;

use crate::core::{Claim, Core, Held};

impl Core {
    /// Claims a due message of `priorities` (empty: all), waiting up to `wait` for one.
    pub(crate) async fn receive(
        self: &Arc<Self>,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        let selected = self.queues.selected(priorities)?;
        let give_up = hermes_core::driver::deadline(wait);
        let mut notified = self.listener.as_ref().map(|listener| listener.subscribe());
        loop {
            if let Some(notified) = &mut notified {
                notified.borrow_and_update();
            }
            if let Some(delivery) = self.take_one(&selected).await? {
                return Ok(Some(delivery));
            }
            self.ran_dry();
            let now = Instant::now();
            if now >= give_up {
                return Ok(None);
            }
            let mut until = give_up.min(now + self.options.refresh_interval);
            let names: Vec<&str> = selected.iter().map(|(_, queue)| queue.as_str()).collect();
            if let Some(next) = self.next_due(&names).await? {
                // A little after, so that the server's clock has passed it.
                let next = Duration::try_from_secs_f64(next.max(0.0)).unwrap_or_default();
                until = until.min(now + next + Duration::from_millis(2));
            }
            // The count moves with each notification, and when the listening connection
            // starts listening (a worker that began to wait before it did wakes then).
            match &mut notified {
                Some(notified) => {
                    let _ = tokio::time::timeout_at(until, notified.changed()).await;
                }
                None => tokio::time::sleep_until(until).await,
            }
        }
    }

    /// A message of `selected` from the buffer, or from a claim; `None` when the queues have
    /// none due now.
    async fn take_one(
        self: &Arc<Self>,
        selected: &[(Priority, String)],
    ) -> Result<Option<Delivery>, Error> {
        loop {
            if let Some(held) = self.take_buffered(selected) {
                match self.deliver(held).await? {
                    Some(delivery) => return Ok(Some(delivery)),
                    None => continue,
                }
            }
            if self.fetch(selected).await? == 0 {
                return Ok(None);
            }
        }
    }

    /// Claims rows into the buffer, one claim at a time per driver; returns how many rows of
    /// `selected` the buffer holds then. The claim runs in a task of its own, holding the
    /// claim lock to its end, so a dropped `receive` loses nothing: what it claimed waits in
    /// the buffer, and a `flush` waits for it.
    ///
    /// While the buffer holds rows of `selected`, no claim is made: up to `prefetch - 1` rows
    /// claimed ahead are handed out before a message of a higher priority that came since.
    async fn fetch(self: &Arc<Self>, selected: &[(Priority, String)]) -> Result<usize, Error> {
        let one_at_a_time = self.fetching.clone().lock_owned().await;
        let waiting = self
            .buffer()
            .iter()
            .filter(|held| selected.iter().any(|(p, _)| *p == held.priority))
            .count();
        if waiting > 0 {
            return Ok(waiting);
        }
        let core = self.clone();
        let selected = selected.to_vec();
        hermes_core::driver::task::detached(async move {
            let claimed = core.claim(&selected).await;
            drop(one_at_a_time);
            claimed
        })
        .await
    }

    /// One claim of up to `prefetch` rows of `selected`, sending the deferred
    /// acknowledgements with it; adds the rows to the buffer and returns how many.
    async fn claim(self: &Arc<Self>, selected: &[(Priority, String)]) -> Result<usize, Error> {
        let names: Vec<&str> = selected.iter().map(|(_, queue)| queue.as_str()).collect();
        let lease = rand::random::<i64>();
        let visibility = self.options.visibility_timeout.as_secs_f64();
        let wanted = i32::try_from(self.options.prefetch.max(1)).unwrap_or(i32::MAX);
        let acked = self.take_acked();
        let (done_ids, done_leases): (Vec<i64>, Vec<i64>) =
            acked.iter().map(|claim| (claim.id, claim.lease)).unzip();
        let names = &names;
        let claimed = self
            .on_connection("a claim", |client| async move {
                let statement = client.prepare_cached(&self.sql.claim).await?;
                client
                    .query(
                        &statement,
                        &[names, &wanted, &visibility, &lease, &done_ids, &done_leases],
                    )
                    .await
            })
            .await;
        let rows = match claimed {
            Ok(rows) => {
                self.deleted(acked.len());
                rows
            }
            Err(e) => {
                self.defer_acks(acked);
                return Err(e);
            }
        };
        let at = Instant::now();
        let count = rows.len();
        self.buffer().extend(rows.into_iter().map(|row| {
            let rank: i32 = row.get(1);
            let priority = usize::try_from(rank)
                .ok()
                .and_then(|rank| selected.get(rank))
                .map_or(hermes_core::DEFAULT_PRIORITY, |(priority, _)| *priority);
            Held {
                claim: Claim {
                    id: row.get(0),
                    lease,
                },
                priority,
                due: row.get(2),
                body: row.get(3),
                at,
            }
        }));
        if count > 0 {
            self.start_buffer_sweeper();
        }
        Ok(count)
    }

    /// A held row as a delivery: a row ahead of its message's time goes back until then
    /// (`None`), and one that cannot be decoded to the dead letters (an error).
    async fn deliver(&self, held: Held) -> Result<Option<Delivery>, Error> {
        match self.serializer.deserialize(&held.body) {
            Ok(message) if message.due() > held.due && !message.is_due_at(unix_now()) => {
                // Put on the table ahead of its time (by another program): back until due.
                // (A row due by its own time is delivered, whatever this machine's clock says.)
                self.postpone(held.claim, message.due()).await?;
                Ok(None)
            }
            Ok(message) => {
                // Handed out within the hold limit, so at least half the visibility timeout
                // of the claim is left.
                let lease = self
                    .options
                    .visibility_timeout
                    .saturating_sub(held.at.elapsed());
                let delivery = Delivery::new(message, held.priority, Receipt::new(held.claim));
                Ok(Some(delivery.with_lease(lease)))
            }
            Err(source) => {
                let reason = DeadReason::new(DeadKind::Undecodable, source.to_string());
                self.bury(held.claim, None, &reason).await?;
                Err(Error::Undecodable {
                    quarantine: format!("{}.dead_letters", self.options.schema),
                    source,
                })
            }
        }
    }

    /// How long until the next row of `names` is due or a claim of them expires (negative:
    /// one is already); none when there is no row.
    async fn next_due(&self, names: &[&str]) -> Result<Option<f64>, Error> {
        let row = self
            .on_connection("looking for the next due time", |client| async move {
                let statement = client.prepare_cached(&self.sql.next_due).await?;
                client.query_one(&statement, &[&names]).await
            })
            .await?;
        Ok(row.get(0))
    }

    /// Gives `claim` back, due at `due`.
    async fn postpone(&self, claim: Claim, due: f64) -> Result<(), Error> {
        self.on_connection("postponing a message", |client| async move {
            let statement = client.prepare_cached(&self.sql.postpone).await?;
            client
                .execute(&statement, &[&claim.id, &claim.lease, &due])
                .await
                .map(drop)
        })
        .await
    }

    /// How long a claimed row may wait in the buffer: half the visibility timeout, so a
    /// handler that gets it has at least that much of its claim left.
    fn hold_limit(&self) -> Duration {
        self.options.visibility_timeout / 2
    }

    /// Takes the rows held for the hold limit or longer out of the buffer (at its front: the
    /// buffer is in claim order).
    fn take_stale(&self) -> Vec<Held> {
        let limit = self.hold_limit();
        let mut buffer = self.buffer();
        let mut stale = Vec::new();
        while buffer
            .front()
            .is_some_and(|held| held.at.elapsed() >= limit)
        {
            stale.extend(buffer.pop_front());
        }
        stale
    }

    /// Takes the first buffered row of `selected`; rows held for the hold limit are given back
    /// instead, in the background.
    fn take_buffered(self: &Arc<Self>, selected: &[(Priority, String)]) -> Option<Held> {
        let stale = self.take_stale();
        if !stale.is_empty() {
            let core = self.clone();
            tokio::spawn(async move {
                let _ = core.give_back(&stale).await;
            });
        }
        let mut buffer = self.buffer();
        let index = buffer
            .iter()
            .position(|held| selected.iter().any(|(p, _)| *p == held.priority));
        index.and_then(|i| buffer.remove(i))
    }

    /// Starts, once, the task that gives back buffered rows when they reach the hold limit,
    /// even when no `receive` comes (the worker's handlers are all busy). It holds the driver
    /// weakly and ends with it.
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
                let stale = core.take_stale();
                if !stale.is_empty() {
                    let _ = core.give_back(&stale).await;
                }
                let next = core
                    .buffer()
                    .front()
                    .map_or(limit, |held| limit.saturating_sub(held.at.elapsed()));
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
