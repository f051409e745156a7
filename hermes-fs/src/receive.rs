//! Receiving: the claim of the first due file by a rename into `processing/`, the ordered
//! index of `new/` that spares a worker reading the whole folder for every message, and the
//! upkeep while waiting (reading folders whose index may be stale, returning expired claims).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_core::driver::{Delivery, Receipt};
use hermes_core::inspect::{DeadKind, DeadReason};
use hermes_core::time::{unix_now, until};
use hermes_core::{Error, Priority};

use crate::core::{Claim, Core};
use crate::files::{Head, QueueDir, Watcher};
use crate::{dead_letters, naming};

/// How often a watched folder is read whole anyway, in case a notification was lost.
const SAFETY_RESCAN: Duration = Duration::from_secs(60);

impl Core {
    pub(crate) async fn receive(
        &self,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        let queues = self.queues.selected(priorities)?;
        self.prepare(&queues)?;
        let give_up = Instant::now() + wait;
        loop {
            let notified = self.wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let maintain_at = self.maintain(&queues)?;
            let next_due = match self.try_claim(&queues)? {
                Ok(delivery) => return Ok(Some(delivery)),
                Err(next_due) => next_due,
            };
            let now = Instant::now();
            if now >= give_up {
                return Ok(None);
            }
            let mut wake_at = give_up.min(maintain_at);
            if let Some(due) = next_due {
                wake_at = wake_at.min(now + until(due));
            }
            tokio::select! {
                () = &mut notified => {},
                () = tokio::time::sleep_until(wake_at.into()) => {},
            }
        }
    }

    /// Creates, watches and indexes the queues a worker reads, the first time.
    fn prepare(&self, queues: &[(Priority, Arc<QueueDir>)]) -> Result<(), Error> {
        for (_, queue) in queues {
            if queue.lock().scanned {
                continue;
            }
            queue.ensure_created()?;
            self.watch_and_scan(queue)?;
        }
        Ok(())
    }

    /// Watches `queue`'s `new/` folder, then reads it whole: in that order, so no file slips
    /// between the read and the watch.
    fn watch_and_scan(&self, queue: &Arc<QueueDir>) -> Result<(), Error> {
        let watched = self.with_watcher(|w| w.watch(queue));
        queue.lock().watched = watched;
        self.scan(queue)
    }

    /// Reads `queue`'s `new/` folder whole and notes when.
    fn scan(&self, queue: &QueueDir) -> Result<(), Error> {
        queue.scan()?;
        self.schedule()
            .last_scans
            .insert(queue.name.clone(), Instant::now());
        Ok(())
    }

    /// Runs `f` on the watcher, starting it the first time.
    fn with_watcher<R>(&self, f: impl FnOnce(&mut Watcher) -> R) -> R {
        let mut watcher = self.watcher.lock().unwrap_or_else(|e| e.into_inner());
        f(watcher.get_or_insert_with(|| Watcher::start(self.options.watch, self.wake.clone())))
    }

    /// With a backlog left after a claim, switches notifications off for `queue`: the index
    /// already holds work, and the worker's own claims would wake it for every message.
    fn pause_watch_if_busy(&self, queue: &QueueDir) {
        let mut state = queue.lock();
        if state.watched && state.files.len() >= 2 {
            state.watched = false;
            state.paused = true;
            drop(state);
            self.with_watcher(|w| w.unwatch(queue));
        }
    }

    /// When the index of a paused queue ran dry: notifications on again, then the folder read
    /// for what arrived meanwhile. Returns whether the queue was paused.
    fn resume_watch(&self, queue: &Arc<QueueDir>) -> Result<bool, Error> {
        if !std::mem::take(&mut queue.lock().paused) {
            return Ok(false);
        }
        self.watch_and_scan(queue)?;
        // Other workers of this instance may be waiting for what the read found.
        self.wake.notify_waiters();
        Ok(true)
    }

    /// Rereads folders whose index may be stale and returns expired claims to `new/`. Returns
    /// when this should run again.
    fn maintain(&self, queues: &[(Priority, Arc<QueueDir>)]) -> Result<Instant, Error> {
        let now = Instant::now();
        let refresh = self.options.refresh_interval.max(Duration::from_millis(1));
        let mut next = now + SAFETY_RESCAN;
        for (_, queue) in queues {
            let (watched, flagged) = {
                let state = queue.lock();
                // A paused queue is read again when its index runs dry.
                (state.watched || state.paused, state.rescan)
            };
            let period = if watched { SAFETY_RESCAN } else { refresh };
            let last = self.schedule().last_scans.get(&queue.name).copied();
            let due = last.map_or(now, |at| at + period);
            if flagged || due <= now {
                self.scan(queue)?;
                next = next.min(now + period);
            } else {
                next = next.min(due);
            }
        }
        let visibility = self.options.visibility_timeout;
        if visibility.is_zero() {
            return Ok(next);
        }
        let next_reclaim = self.schedule().next_reclaim;
        if next_reclaim <= now {
            let expired_before = unix_now() - visibility.as_secs_f64();
            let mut check_at = now + visibility.min(refresh);
            for (_, queue) in queues {
                if let Some(earliest) = queue.return_expired(expired_before)? {
                    let expires = until(earliest + visibility.as_secs_f64());
                    check_at = check_at.min(now + expires);
                }
            }
            self.schedule().next_reclaim = check_at;
            Ok(next.min(check_at))
        } else {
            Ok(next.min(next_reclaim))
        }
    }

    /// Claims the first due message of `queues`, highest priority first; otherwise returns the
    /// earliest due time among their heads.
    fn try_claim(
        &self,
        queues: &[(Priority, Arc<QueueDir>)],
    ) -> Result<Result<Delivery, Option<f64>>, Error> {
        let now = unix_now();
        let mut next_due: Option<f64> = None;
        for (priority, queue) in queues {
            loop {
                let file = match queue.head(now) {
                    Head::Due(file) => file,
                    Head::NotDue(_) | Head::Empty if self.resume_watch(queue)? => continue,
                    Head::NotDue(due) => {
                        next_due = Some(next_due.map_or(due, |d| d.min(due)));
                        break;
                    }
                    Head::Empty => break,
                };
                let claimed = naming::claimed_file(unix_now(), &file);
                let Some(body) = queue.claim(&file, &claimed)? else {
                    continue;
                };
                self.pause_watch_if_busy(queue);
                return match self.serializer.deserialize(&body) {
                    Ok(message) if !message.is_due_at(now) => {
                        // Put in `new/` ahead of its time (by hand, or by an emitter that
                        // ignores delays): renamed to wait for its due time.
                        queue.postpone(&claimed, message.due())?;
                        continue;
                    }
                    Ok(message) => {
                        let claim = Claim {
                            queue: queue.clone(),
                            file,
                            claimed: Mutex::new(claimed),
                        };
                        let delivery = Delivery::new(message, *priority, Receipt::new(claim));
                        Ok(Ok(self.leased(delivery)))
                    }
                    Err(source) => {
                        let reason = DeadReason::new(DeadKind::Undecodable, source.to_string());
                        if let Err(e) = dead_letters::write_reason(&queue.failed, &file, &reason) {
                            tracing::warn!("Cannot record why {file} is undecodable - {e}");
                        }
                        let to = queue.quarantine(&claimed, &file);
                        Err(Error::Undecodable {
                            quarantine: to.display().to_string(),
                            source,
                        })
                    }
                };
            }
        }
        Ok(Err(next_due))
    }

    /// `delivery` with its lease: the visibility timeout, when claims expire.
    fn leased(&self, delivery: Delivery) -> Delivery {
        let visibility = self.options.visibility_timeout;
        if visibility.is_zero() {
            delivery
        } else {
            delivery.with_lease(visibility)
        }
    }
}
