//! Wake-ups: an idle worker finds a message a Rust emitter sent about one round trip later,
//! instead of at its next look at the queue.
//!
//! - A send pokes the queue's wake list `<key>_wake` (in the queue's hash slot): it holds one
//!   token at most, and expires by itself. Pokes are coalesced: one at a time per process, at
//!   most one per millisecond. A send that finds a poke due carries it in its own script, so
//!   the message and the token arrive together and nothing is left for later; a send made
//!   while a poke is in flight or too recent leaves one pending, sent by a task of this
//!   process once it is due, by `flush`, or, when the last handle of the driver is dropped,
//!   on a connection of its own before the drop returns. A process that emits once and exits
//!   thus wakes a worker, and so does one that emits a burst and ends, however it ends short
//!   of being killed.
//! - A poke that finds the last token still there knows that no worker waits (a waiting
//!   worker takes a token at once), so the next one waits twice as long, up to
//!   [`LONGEST_POKE_GAP`]; one that finds the list empty goes back to the shortest gap. A busy
//!   emitter with busy workers thus sends a few pokes a second. A worker that begins to wait
//!   meanwhile takes the token that is there and claims; a message sent just after that claim
//!   waits for the next poke, at most that gap later.
//! - While a `receive` of this process waits, a listener blocks on the list (`BLPOP`) on a
//!   connection of its own, for at most [`RedisOptions::refresh_interval`](crate::RedisOptions)
//!   or until the next delayed message is due, and tells the waiting receives to claim when it
//!   returns, token or not. An idle worker thus sends two commands per refresh interval.
//! - A claim that took a full batch pokes too, so the next idle worker claims what is left.
//! - PHP emitters do not poke: their messages are found when the listener's wait ends, or at
//!   once with [`RedisOptions::keyspace_wake_ups`](crate::RedisOptions) on a server that
//!   publishes keyspace events.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use hermes_core::Error;
use hermes_core::time::unix_now;
use tokio::sync::{Notify, watch};

use crate::client::{OpenKeyspace, OpenListener, RedisClient, Reply, WakeConnections};
use crate::scripts::Script;

/// The longest one blocking wait, well within the client's bound on a call.
const LONGEST_BLOCK: Duration = Duration::from_secs(3);

/// The least time between two pokes of one process.
const POKE_GAP: Duration = Duration::from_millis(1);

/// The most time between two pokes of one process, while its pokes find the token unclaimed.
const LONGEST_POKE_GAP: Duration = Duration::from_millis(64);

/// How many times a poke lost on a broken connection is sent again.
const POKE_RETRIES: u32 = 10;

/// The most time between two attempts at a poke lost on a broken connection.
const LONGEST_RETRY_GAP: Duration = Duration::from_millis(500);

/// The longest the drop of a driver's last handle waits for the poke it owes.
const LAST_POKE_LIMIT: Duration = Duration::from_secs(1);

/// What the driver's clones share for wake-ups: the wake list and the client that pokes it,
/// and the state of the poker and the listener.
pub(crate) struct Wakes {
    /// The client that pokes, and the wake list `<key>_wake`.
    client: Arc<dyn RedisClient>,
    key: String,
    /// The longest a listener blocks, the driver's refresh interval.
    refresh: Duration,
    /// The emit side: a poke is wanted, and the task sending them is told so; whether a
    /// poke is in flight, when the next may leave (nanoseconds after `epoch`), the gap after
    /// the last one, and how many pokes in a row were lost on a broken connection.
    pending: AtomicBool,
    poke: Arc<Notify>,
    poker: AtomicBool,
    in_flight: AtomicBool,
    epoch: Instant,
    next_at: AtomicU64,
    gap: AtomicU64,
    failures: AtomicU32,
    /// The receive side: how many receives wait, the number the listener raises each time
    /// they should claim, and whether it runs.
    waiting: AtomicUsize,
    round: watch::Sender<u64>,
    listener: AtomicBool,
    /// The listener's connection once opened, and how to open one (none: receives poll).
    connection: tokio::sync::Mutex<Option<Arc<dyn RedisClient>>>,
    open: Option<OpenListener>,
    /// How to subscribe to keyspace events (none: not wanted), the keys whose events wake
    /// receives, and whether the task following them runs.
    keyspace: Option<OpenKeyspace>,
    watched: watch::Sender<Vec<String>>,
    following: AtomicBool,
    /// When the earliest delayed message is due (Unix seconds, as f64 bits; 0: none known), as
    /// the last claim that found nothing saw it.
    next_due: AtomicU64,
    /// Raised by every claim, so the listener waits for the claim its round started.
    claims: watch::Sender<u64>,
    /// One more than the round in which a claim began that found nothing (0: none since): till
    /// the round moves on, a receive need not claim again before it waits.
    empty_in: AtomicU64,
    /// The last listener failure logged, so a lasting outage is logged once.
    failure: Mutex<Option<String>>,
}

impl fmt::Debug for Wakes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wakes")
            .field("listens", &self.open.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for Wakes {
    fn drop(&mut self) {
        // Ends the poker's wait, so its task ends with the driver.
        self.poke.notify_one();
        if self.pending.load(Ordering::Acquire) {
            self.poke_on_the_way_out();
        }
    }
}

impl Wakes {
    /// Wake-ups through the list `key`, poked on `client`; receives are woken when `open`
    /// gives a listener's connection, and poll otherwise; and by the keyspace events of the
    /// keys given with `keyspace`, when given.
    pub(crate) fn new(
        client: Arc<dyn RedisClient>,
        key: String,
        refresh: Duration,
        open: Option<OpenListener>,
        keyspace: Option<(OpenKeyspace, Vec<String>)>,
    ) -> Self {
        let (keyspace, watched) =
            keyspace.map_or((None, Vec::new()), |(open, keys)| (Some(open), keys));
        Wakes {
            client,
            key,
            refresh,
            pending: AtomicBool::new(false),
            poke: Arc::new(Notify::new()),
            poker: AtomicBool::new(false),
            in_flight: AtomicBool::new(false),
            epoch: Instant::now(),
            next_at: AtomicU64::new(0),
            gap: AtomicU64::new(nanos(POKE_GAP)),
            failures: AtomicU32::new(0),
            waiting: AtomicUsize::new(0),
            round: watch::Sender::new(0),
            listener: AtomicBool::new(false),
            connection: tokio::sync::Mutex::new(None),
            open,
            keyspace,
            watched: watch::Sender::new(watched),
            following: AtomicBool::new(false),
            next_due: AtomicU64::new(0),
            claims: watch::Sender::new(0),
            empty_in: AtomicU64::new(0),
            failure: Mutex::new(None),
        }
    }

    /// How this driver opens its connections for wake-ups, for a new instance on the same
    /// queue.
    pub(crate) fn connections(&self) -> WakeConnections {
        WakeConnections {
            listener: self.open.clone(),
            keyspace: self.keyspace.clone(),
        }
    }

    /// Adds `key` to the keys whose keyspace events wake receives.
    pub(crate) fn watch(&self, key: &str) {
        self.watched.send_if_modified(|keys| {
            let new = !keys.iter().any(|k| k == key);
            if new {
                keys.push(key.to_owned());
            }
            new
        });
    }

    /// How long until the earliest delayed message the last empty claim saw is due.
    pub(crate) fn until_next_due(&self) -> Option<Duration> {
        self.next_due()
            .map(|at| Duration::try_from_secs_f64(at - unix_now()).unwrap_or_default())
    }

    /// Whether receives are also woken by keyspace events.
    pub(crate) fn follows_keyspace(&self) -> bool {
        self.keyspace.is_some()
    }

    /// Starts a round of claims, when receives wait.
    pub(crate) fn wake_receives(&self) {
        if self.waiting.load(Ordering::Acquire) > 0 {
            self.round.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Whether receives are woken (a listener can be opened), rather than polling.
    pub(crate) fn listens(&self) -> bool {
        self.open.is_some()
    }

    /// The round the next wait starts from; read before claiming, so a wake during the claim
    /// is not missed.
    pub(crate) fn round(&self) -> watch::Receiver<u64> {
        self.round.subscribe()
    }

    /// The round now, to give [`claimed`](Wakes::claimed) for a claim beginning now.
    pub(crate) fn round_now(&self) -> u64 {
        *self.round.borrow()
    }

    /// Whether nothing can have arrived since a claim found nothing: no round began since it
    /// did (a send, a due delayed message or the refresh interval start one).
    pub(crate) fn quiet(&self) -> bool {
        self.listens() && self.empty_in.load(Ordering::Acquire) == self.round_now() + 1
    }

    /// Records what a claim that began in round `began` saw: whether messages may be left
    /// (it took some, or did not look at every set), and the earliest due time of the
    /// schedule when it took nothing.
    pub(crate) fn claimed(&self, began: u64, may_be_left: bool, next_due: Option<f64>) {
        let empty = if may_be_left {
            0
        } else {
            began.wrapping_add(1)
        };
        self.empty_in.store(empty, Ordering::Release);
        if let Some(at) = next_due {
            self.next_due.store(at.to_bits(), Ordering::Relaxed);
        } else {
            self.next_due.store(0, Ordering::Relaxed);
        }
        self.claims.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn next_due(&self) -> Option<f64> {
        let bits = self.next_due.load(Ordering::Relaxed);
        (bits != 0).then(|| f64::from_bits(bits))
    }

    /// A poke for the send about to go to carry in its own script, when one is due: none is
    /// in flight and the gap since the last one is over. It stands for every poke asked for
    /// before; give it back with [`Carried::sent`] once the send's script ran.
    pub(crate) fn carry(self: &Arc<Self>) -> Option<Carried> {
        if !self.until_due().is_zero() {
            return None;
        }
        let sending = Sending::take(self)?;
        let owed = self.pending.swap(false, Ordering::AcqRel);
        Some(Carried {
            sending: Some(sending),
            owed,
        })
    }

    /// Asks for a poke of the wake list, sent by the poker task once due. Starts the task
    /// once.
    pub(crate) fn poke(self: &Arc<Self>) {
        self.pending.store(true, Ordering::Release);
        self.poke.notify_one();
        if self.poker.swap(true, Ordering::AcqRel) {
            return;
        }
        let notify = self.poke.clone();
        let weak = Arc::downgrade(self);
        // Outside a runtime (a runtime dropping its tasks), the poke stays owed: the next send,
        // `flush` or the drop of the driver sends it.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.poker.store(false, Ordering::Release);
            return;
        };
        runtime.spawn(async move {
            // Lets a later poke start another task when this one's runtime shuts down.
            let _running = PokerRunning(weak.clone());
            loop {
                notify.notified().await;
                loop {
                    let Some(wakes) = weak.upgrade() else { return };
                    if !wakes.pending.load(Ordering::Acquire) {
                        break;
                    }
                    let wait = wakes.until_due();
                    if !wait.is_zero() {
                        drop(wakes);
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                    // A poke in flight tells this task when it ends, if one is still wanted.
                    let Some(sending) = Sending::take(&wakes) else {
                        break;
                    };
                    if !wakes.pending.swap(false, Ordering::AcqRel) {
                        break;
                    }
                    let result = wakes.poke_now().await;
                    sending.done(result);
                }
            }
        });
    }

    /// Sends the poke asked for and not sent yet, if any.
    ///
    /// # Cancellation safety
    /// Dropped before it ends, the poke is asked for again and the poker task sends it.
    pub(crate) async fn flush(self: &Arc<Self>) -> Result<(), Error> {
        if !self.pending.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let again = PokeAgain(self);
        self.poke_now().await?;
        std::mem::forget(again);
        Ok(())
    }

    /// How long until the next poke may leave.
    fn until_due(&self) -> Duration {
        let now = nanos(self.epoch.elapsed());
        Duration::from_nanos(self.next_at.load(Ordering::Acquire).saturating_sub(now))
    }

    /// Records how the poke in flight ended (`Ok(None)`: it went, whether it put a token in is
    /// not known), and sets when the next may leave.
    fn poked(self: &Arc<Self>, result: Result<Option<bool>, Error>) {
        let gap = Duration::from_nanos(self.gap.load(Ordering::Acquire));
        let gap = match result {
            Ok(pushed) => {
                self.failures.store(0, Ordering::Release);
                match pushed {
                    Some(true) => POKE_GAP,
                    Some(false) => (gap * 2).min(LONGEST_POKE_GAP),
                    None => gap,
                }
            }
            Err(e) if e.is_temporary() && self.failures.load(Ordering::Acquire) < POKE_RETRIES => {
                // Lost on a broken connection: sent again, further apart each time (for about
                // two seconds in all), so that a send just before a short outage keeps its
                // poke.
                let failures = self.failures.fetch_add(1, Ordering::AcqRel) + 1;
                self.pending.store(true, Ordering::Release);
                (POKE_GAP * (1 << failures)).min(LONGEST_RETRY_GAP)
            }
            Err(_) => {
                self.failures.store(0, Ordering::Release);
                POKE_GAP
            }
        };
        self.gap.store(nanos(gap), Ordering::Release);
        let next = nanos(self.epoch.elapsed()) + nanos(gap);
        self.next_at.store(next, Ordering::Release);
    }

    /// Pokes the wake list now: whether it put a token in (`false`: the last one was still
    /// there).
    pub(crate) async fn poke_now(&self) -> Result<bool, Error> {
        poke_list(self.client.as_ref(), &self.key).await
    }

    /// Sends the poke still owed as the driver goes away, on a connection and a runtime of its
    /// own (the driver's runtime may be ending), waiting at most [`LAST_POKE_LIMIT`]. Without a
    /// way to open a connection, the poke is handed to the driver's runtime, if it runs.
    fn poke_on_the_way_out(&self) {
        let key = self.key.clone();
        let Some(open) = self.open.clone() else {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let client = self.client.clone();
                runtime.spawn(async move {
                    let _ = poke_list(client.as_ref(), &key).await;
                });
            }
            return;
        };
        let poke = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                let _ = tokio::time::timeout(LAST_POKE_LIMIT, async {
                    let client = open().await?;
                    poke_list(client.as_ref(), &key).await
                })
                .await;
            });
        });
        let _ = poke.join();
    }

    /// Counts a receive as waiting, and starts the listener when it does not run.
    pub(crate) fn wait_here(self: &Arc<Self>) -> Waiting<'_> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        if self.listens() && !self.listener.swap(true, Ordering::AcqRel) {
            tokio::spawn(listen(Arc::downgrade(self)));
        }
        Waiting(self)
    }

    /// One `BLPOP` of the wake list for at most `wait`: whether it took a token.
    async fn block(&self, wait: Duration) -> Result<bool, Error> {
        let connection = {
            let mut connection = self.connection.lock().await;
            match &*connection {
                Some(c) => c.clone(),
                None => {
                    let open = self.open.as_ref().ok_or_else(|| Error::Config {
                        driver: self.client.name(),
                        message: "no connection for wake-ups".to_owned(),
                    })?;
                    let opened = open().await?;
                    *connection = Some(opened.clone());
                    opened
                }
            }
        };
        let seconds = format!("{:.3}", wait.as_secs_f64());
        match connection
            .command("BLPOP", &[self.key.as_bytes(), seconds.as_bytes()])
            .await
        {
            Ok(reply) => Ok(!matches!(reply, Reply::Nil)),
            Err(e) => {
                // Opened again next time: a connection may not outlive its runtime.
                self.connection.lock().await.take();
                Err(e)
            }
        }
    }

    fn note_failure(&self, error: &Error) {
        let text = error.to_string();
        let mut last = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if last.as_deref() != Some(text.as_str()) {
            tracing::warn!(
                "Waiting for wake-ups on {} failed - {text}; polling meanwhile",
                self.key
            );
            *last = Some(text);
        }
    }
}

/// Counts a receive as waiting while it lives.
pub(crate) struct Waiting<'a>(&'a Wakes);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Pokes the wake list `key` on `client`: whether it put a token in.
async fn poke_list(client: &dyn RedisClient, key: &str) -> Result<bool, Error> {
    Ok(token_pushed(&client.eval(Script::Wake, &[key], &[]).await?))
}

/// Whether a script that pokes the wake list put a token in, by its reply (`0`: the last
/// token was still there).
pub(crate) fn token_pushed(reply: &Reply) -> bool {
    reply.as_int() != Some(0)
}

/// The one poke in flight of this process; ends it when dropped.
struct Sending(Arc<Wakes>);

impl Sending {
    /// Takes the turn to poke, unless a poke is in flight.
    fn take(wakes: &Arc<Wakes>) -> Option<Sending> {
        (!wakes.in_flight.swap(true, Ordering::AcqRel)).then(|| Sending(wakes.clone()))
    }

    /// Ends the poke with its outcome, and hands the turn to a poke asked for meanwhile.
    fn done(self, result: Result<bool, Error>) {
        self.0.poked(result.map(Some));
    }
}

impl Drop for Sending {
    fn drop(&mut self) {
        self.0.in_flight.store(false, Ordering::Release);
        if self.0.pending.load(Ordering::Acquire) {
            self.0.poke();
        }
    }
}

/// A poke a send carries in its own script (see [`Wakes::carry`]).
pub(crate) struct Carried {
    sending: Option<Sending>,
    /// Whether a poke was asked for before, which this one stands for.
    owed: bool,
}

impl Carried {
    /// The send's script ran and poked: `pushed` tells whether it put a token in, when known.
    pub(crate) fn sent(mut self, pushed: Option<bool>) {
        if let Some(sending) = self.sending.take() {
            sending.0.poked(Ok(pushed));
        }
    }

    /// The send's script ran without poking (it queued nothing): a poke asked for before is
    /// still owed.
    pub(crate) fn unused(mut self) {
        if let Some(sending) = self.sending.take()
            && self.owed
        {
            sending.0.pending.store(true, Ordering::Release);
        }
    }
}

impl Drop for Carried {
    fn drop(&mut self) {
        // The send failed or was dropped: whether its poke went is not known, so one is owed.
        if let Some(sending) = self.sending.take() {
            sending.0.pending.store(true, Ordering::Release);
        }
    }
}

/// Asks for a poke again when a flush is dropped before its poke went.
struct PokeAgain<'a>(&'a Arc<Wakes>);

impl Drop for PokeAgain<'_> {
    fn drop(&mut self) {
        self.0.poke();
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Clears the poker flag when the poker task ends, however it ends.
struct PokerRunning(Weak<Wakes>);

impl Drop for PokerRunning {
    fn drop(&mut self) {
        if let Some(wakes) = self.0.upgrade() {
            wakes.poker.store(false, Ordering::Release);
        }
    }
}

/// Clears the listener flag when the listener task ends, however it ends.
struct ListenerRunning(Weak<Wakes>);

impl Drop for ListenerRunning {
    fn drop(&mut self) {
        if let Some(wakes) = self.0.upgrade() {
            wakes.listener.store(false, Ordering::Release);
            // A receive that began to wait as this listener decided to end has none.
            if wakes.waiting.load(Ordering::Acquire) > 0 {
                wakes.round.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }
}

/// The listener: while receives wait, blocks on the wake list and starts a round of claims
/// each time it returns.
async fn listen(weak: Weak<Wakes>) {
    let _running = ListenerRunning(weak.clone());
    loop {
        let Some(wakes) = weak.upgrade() else { return };
        if wakes.waiting.load(Ordering::Acquire) == 0 {
            return;
        }
        let refresh = wakes.refresh;
        let wait = wakes
            .next_due()
            .map_or(refresh, |at| {
                Duration::try_from_secs_f64(at - unix_now())
                    .unwrap_or_default()
                    .min(refresh)
            })
            .clamp(Duration::from_millis(1), LONGEST_BLOCK);
        let mut claims = wakes.claims.subscribe();
        let woke = match wakes.block(wait).await {
            Ok(woke) => {
                wakes
                    .failure
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take();
                woke
            }
            Err(e) => {
                wakes.note_failure(&e);
                // The receives look every refresh interval meanwhile; try again after one.
                wakes.round.send_modify(|n| *n = n.wrapping_add(1));
                drop(wakes);
                tokio::time::sleep(refresh).await;
                continue;
            }
        };
        let waiting = wakes.waiting.load(Ordering::Acquire);
        if woke && waiting == 0 {
            // Taken for nobody here: leave it to another worker.
            wakes.poke();
            return;
        }
        claims.mark_unchanged();
        wakes.round.send_modify(|n| *n = n.wrapping_add(1));
        drop(wakes);
        // The round's claim tells when the next delayed message is due; wait for it briefly.
        let _ = tokio::time::timeout(Duration::from_millis(100), claims.changed()).await;
    }
}

impl Wakes {
    /// What the task following keyspace events needs, when they are wanted and the task does
    /// not run yet (it runs from then on): how to subscribe, the keys to follow, and the
    /// refresh interval. The task clears the flag with [`Wakes::followed`] when it ends.
    pub(crate) fn follow(&self) -> Option<(OpenKeyspace, watch::Receiver<Vec<String>>, Duration)> {
        if self.keyspace.is_none() || self.following.swap(true, Ordering::AcqRel) {
            return None;
        }
        let open = self.keyspace.clone()?;
        Some((open, self.watched.subscribe(), self.refresh))
    }

    /// The task following keyspace events ended.
    pub(crate) fn followed(&self) {
        self.following.store(false, Ordering::Release);
    }

    /// The queue's key, for logs.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The client the driver sends on.
    pub(crate) fn client(&self) -> &Arc<dyn RedisClient> {
        &self.client
    }
}
