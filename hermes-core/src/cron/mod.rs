//! Periodic jobs: a [`Scheduler`] emits one message per tick of each of its cron entries.

mod entry;
mod schedule;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use entry::{CatchUp, CronEntry};
pub use schedule::CronSchedule;

use crate::time::unix_now;
use crate::{Emitted, Emitter, Error, Unique};

/// The shortest time a tick's key is held: long enough for every scheduler to have seen it.
const SHORTEST_TICK_WINDOW: Duration = Duration::from_secs(60);

/// The longest sleep between two looks at the clock, so that a clock that jumps (a suspended
/// machine, a corrected time) is noticed.
const LONGEST_SLEEP: Duration = Duration::from_secs(30);

/// How long a scheduler waits before trying a tick again after a temporary error.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Emits the messages of named cron entries, one per tick.
///
/// Any number of schedulers, in any number of processes, can run the same entries on one queue:
/// each tick is a [unique](Unique) emit keyed by the entry's name and the tick, held until a
/// while after the tick, so exactly one message per tick is queued, whose id
/// (`cron-<name>-<tick>`) every scheduler makes alike. That needs a driver with
/// the [`unique`](crate::Driver::unique) facet (memory, filesystem, Redis); on
/// RabbitMQ and SQS each scheduler emits every tick, so run one per queue (a warning says
/// so).
///
/// Entries can be added and removed while it runs. Ticks that passed while no scheduler ran
/// are caught up as [`CatchUp`] says (by default the last one).
///
/// ```
/// # async fn demo() -> Result<(), hermes_core::Error> {
/// use hermes_core::cron::CronSchedule;
/// use hermes_core::{CronEntry, Emitter, Scheduler};
/// use hermes_testkit::MemoryDriver;
///
/// let scheduler = Scheduler::new(Emitter::new(MemoryDriver::new()));
/// scheduler.add(CronEntry::new(
///     "nightly-export",
///     CronSchedule::new("0 3 * * *", "Europe/Bratislava")?,
///     "report.export",
/// ))?;
/// let stop = tokio_util::sync::CancellationToken::new();
/// let running = tokio::spawn({
///     let scheduler = scheduler.clone();
///     let stop = stop.clone();
///     async move { scheduler.run(stop).await }
/// });
/// // … until the process stops:
/// stop.cancel();
/// running.await.unwrap()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    emitter: Emitter,
    catch_up: Mutex<CatchUp>,
    entries: Mutex<BTreeMap<String, Slot>>,
    /// Told when entries change, so that `run` looks at them again.
    changed: Notify,
}

/// An entry and where this scheduler is in its ticks.
#[derive(Debug)]
struct Slot {
    entry: CronEntry,
    /// Ticks up to this time are done (emitted, or found emitted by another scheduler).
    done_until: f64,
    /// The last tick this scheduler emitted or found emitted.
    previous: Option<f64>,
}

/// An entry with its next and previous ticks, as [`Scheduler::status`] gives them.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CronStatus {
    /// The entry.
    pub entry: CronEntry,
    /// Its next tick, in seconds since the epoch; `None` when there is none.
    pub next: Option<f64>,
    /// Its last tick this scheduler emitted or found emitted.
    pub previous: Option<f64>,
}

impl Scheduler {
    /// A scheduler emitting through `emitter`, without entries, catching up on the last
    /// missed tick.
    pub fn new(emitter: Emitter) -> Self {
        Scheduler {
            inner: Arc::new(Inner {
                emitter,
                catch_up: Mutex::new(CatchUp::default()),
                entries: Mutex::new(BTreeMap::new()),
                changed: Notify::new(),
            }),
        }
    }

    /// The same, catching up on missed ticks as `catch_up` says, for the entries added from
    /// now on.
    #[must_use]
    pub fn catch_up(self, catch_up: CatchUp) -> Self {
        *lock(&self.inner.catch_up) = catch_up;
        self
    }

    /// Adds `entry`, replacing the entry of the same name. Its missed ticks are caught up as
    /// the scheduler's [`CatchUp`] says.
    ///
    /// # Errors
    /// [`Error::InvalidSchedule`] for an invalid name.
    pub fn add(&self, entry: CronEntry) -> Result<(), Error> {
        entry.check()?;
        let done_until = self.catch_up_start(&entry, unix_now());
        let slot = Slot {
            entry,
            done_until,
            previous: None,
        };
        lock(&self.inner.entries).insert(slot.entry.name().to_owned(), slot);
        self.inner.changed.notify_waiters();
        Ok(())
    }

    /// Removes the entry called `name`; whether there was one.
    pub fn remove(&self, name: &str) -> bool {
        let removed = lock(&self.inner.entries).remove(name).is_some();
        self.inner.changed.notify_waiters();
        removed
    }

    /// The entries, by name, with their next and previous ticks.
    pub fn status(&self) -> Vec<CronStatus> {
        let now = unix_now();
        lock(&self.inner.entries)
            .values()
            .map(|slot| CronStatus {
                entry: slot.entry.clone(),
                next: slot.entry.schedule().next_after(slot.done_until.max(now)),
                previous: slot.previous,
            })
            .collect()
    }

    /// Emits every entry's ticks as they come, until `stop` is cancelled. A tick that fails
    /// with a temporary error is tried again a second later; one that fails otherwise is
    /// logged and skipped.
    ///
    /// # Errors
    /// None yet: the result leaves room for errors that end the scheduler.
    ///
    /// # Cancellation safety
    /// Cancel `stop` rather than dropping the future: dropped while it emits a tick, that tick
    /// may or may not be queued (a scheduler started later catches it up, once).
    pub async fn run(&self, stop: CancellationToken) -> Result<(), Error> {
        let mut warned = false;
        while !stop.is_cancelled() {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let now = unix_now();
            let (due, next) = self.due_at(now);
            for (entry, tick) in &due {
                let fired = tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    fired = self.fire(entry, *tick, &mut warned) => fired,
                };
                if fired {
                    self.done(entry, *tick);
                    continue;
                }
                tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    () = tokio::time::sleep(RETRY_AFTER) => {}
                }
            }
            if !due.is_empty() {
                continue;
            }
            let sleep = next.map_or(LONGEST_SLEEP, |at| {
                Duration::try_from_secs_f64((at - unix_now()).max(0.0))
                    .map_or(LONGEST_SLEEP, |wait| wait.min(LONGEST_SLEEP))
            });
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = &mut changed => {}
                () = tokio::time::sleep(sleep) => {}
            }
        }
        Ok(())
    }

    /// Where an entry's ticks start at `now` under the catch-up rule: ticks after the time
    /// returned are due.
    fn catch_up_start(&self, entry: &CronEntry, now: f64) -> f64 {
        match *lock(&self.inner.catch_up) {
            CatchUp::None => now,
            CatchUp::Last => entry
                .schedule()
                .last_at_or_before(now)
                .map_or(now, |last| last - 1.0),
            CatchUp::AllWithin(within) => now - within.as_secs_f64(),
        }
    }

    /// The ticks due at `now`, each entry's first one not done, and the earliest tick to come.
    ///
    /// A scheduler that fell behind (a suspended machine, a clock that jumped forwards, a long
    /// outage) starts the entry again from the catch-up rule instead of emitting every tick it
    /// missed, whose keys may have expired; one whose clock went back starts from now.
    fn due_at(&self, now: f64) -> (Vec<(CronEntry, f64)>, Option<f64>) {
        let mut due = Vec::new();
        let mut next: Option<f64> = None;
        for slot in lock(&self.inner.entries).values_mut() {
            let Some(mut tick) = slot.entry.schedule().next_after(slot.done_until) else {
                continue;
            };
            // Past its key's window, a tick may have been emitted by another scheduler whose
            // key expired since: start again from the catch-up rule (never backwards).
            let late = now - tick > self.tick_window(&slot.entry, tick).as_secs_f64();
            let ahead = slot.done_until > now + SHORTEST_TICK_WINDOW.as_secs_f64();
            if late || ahead {
                let start = self.catch_up_start(&slot.entry, now);
                slot.done_until = if late {
                    slot.done_until.max(start)
                } else {
                    start
                };
                match slot.entry.schedule().next_after(slot.done_until) {
                    Some(again) => tick = again,
                    None => continue,
                }
            }
            if tick <= now {
                due.push((slot.entry.clone(), tick));
            } else {
                next = Some(next.map_or(tick, |n| n.min(tick)));
            }
        }
        (due, next)
    }

    /// Marks `tick` of `entry` done, unless the entry was replaced or removed meanwhile.
    fn done(&self, entry: &CronEntry, tick: f64) {
        if let Some(slot) = lock(&self.inner.entries).get_mut(entry.name())
            && slot.entry.schedule().expression() == entry.schedule().expression()
            && slot.entry.schedule().zone() == entry.schedule().zone()
            && slot.done_until < tick
        {
            slot.done_until = tick;
            slot.previous = Some(tick);
        }
    }

    /// Emits the message of `entry`'s `tick`; whether the tick is done (false: try again).
    async fn fire(&self, entry: &CronEntry, tick: f64, warned: &mut bool) -> bool {
        let message = match entry.message_at(tick) {
            Ok(message) => message,
            Err(e) => {
                tracing::error!(
                    "Scheduler entry {} cannot make its message - {e}",
                    entry.name()
                );
                return true;
            }
        };
        let emitter = &self.inner.emitter;
        let priority = entry.priority_of_messages();
        let unique = Unique::by(format!("cron:{}:{}", entry.name(), tick as i64))
            .hold_for(self.tick_window(entry, tick))
            .until_window_ends();
        let emitted = match emitter.emit_unique(&message, priority, &unique).await {
            Err(Error::Unsupported { .. }) => {
                if !*warned {
                    tracing::warn!(
                        "Scheduler: the {} driver has no unique jobs, so every scheduler emits every tick: run one scheduler per queue",
                        emitter.driver().name()
                    );
                    *warned = true;
                }
                emitter
                    .emit(&message, priority)
                    .await
                    .map(|()| Emitted::Queued)
            }
            other => other,
        };
        match emitted {
            Ok(Emitted::Queued) => {
                tracing::info!(
                    entry = entry.name(),
                    id = message.id(),
                    "Scheduler entry {} emitted message #{}",
                    entry.name(),
                    message.id()
                );
                true
            }
            Ok(_) => {
                tracing::debug!(
                    entry = entry.name(),
                    "Scheduler entry {}: tick {} emitted by another scheduler",
                    entry.name(),
                    tick
                );
                true
            }
            Err(e) if e.is_temporary() => {
                tracing::warn!(
                    "Scheduler entry {} failed, trying again - {e}",
                    entry.name()
                );
                false
            }
            Err(e) => {
                tracing::error!("Scheduler entry {} skips a tick - {e}", entry.name());
                true
            }
        }
    }

    /// How long the key of `entry`'s `tick` is held: two periods of the schedule, at least a
    /// minute, and at least the catch-up window, so that no scheduler emits the tick again.
    fn tick_window(&self, entry: &CronEntry, tick: f64) -> Duration {
        let period = entry
            .schedule()
            .next_after(tick)
            .and_then(|next| Duration::try_from_secs_f64(next - tick).ok())
            .unwrap_or(Duration::ZERO);
        let catch_up = match *lock(&self.inner.catch_up) {
            CatchUp::AllWithin(within) => within,
            _ => Duration::ZERO,
        };
        (period * 2)
            .max(SHORTEST_TICK_WINDOW)
            .max(catch_up)
            .min(crate::unique::MAX_UNIQUE_WINDOW)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
