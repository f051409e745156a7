//! Wake-ups: an idle worker finds a message a Rust emitter sent about one round trip later,
//! instead of at its next look at the queue.
//!
//! - After each `send`, the emitter's driver pokes the queue's wake list `<key>_wake` (in the
//!   queue's hash slot): it holds one token at most, and expires by itself. Pokes are
//!   coalesced: one script in flight at a time per process, at most one per millisecond, and a
//!   poke made meanwhile is sent after it, so no send goes without one.
//! - A poke that finds the last token still there knows that no worker waits (a waiting
//!   worker takes a token at once), so the next poke waits twice as long, up to
//!   [`LONGEST_POKE_GAP`]; one that finds the list empty goes back to the shortest gap. A busy
//!   emitter with busy workers thus sends a few pokes a second. A worker that begins to wait
//!   meanwhile takes the token that is there and claims; a message sent just after that claim
//!   waits for the next poke, at most that gap later.
//! - While a `receive` of this process waits, a listener blocks on the list (`BLPOP`) on a
//!   connection of its own, for at most [`RedisOptions::refresh_interval`](crate::RedisOptions)
//!   or until the next delayed message is due, and tells the waiting receives to claim when it
//!   returns, token or not. An idle worker thus sends two commands per refresh interval.
//! - A claim that took a full batch pokes too, so the next idle worker claims what is left.
//! - PHP emitters do not poke: their messages are found when the listener's wait ends.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use hermes_core::Error;
use hermes_core::time::unix_now;
use tokio::sync::{Notify, watch};

use crate::client::{OpenListener, RedisClient, Reply};
use crate::scripts::Script;

/// How long the wake list keeps an unclaimed token.
const TOKEN_TTL_MS: &str = "60000";

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

/// What the driver's clones share for wake-ups: the wake list and the client that pokes it,
/// and the state of the poker and the listener.
pub(crate) struct Wakes {
    /// The client that pokes, and the wake list `<key>_wake`.
    client: Arc<dyn RedisClient>,
    key: String,
    /// The longest a listener blocks, the driver's refresh interval.
    refresh: Duration,
    /// The emit side: a poke is wanted, and the task sending them is told so.
    pending: AtomicBool,
    poke: Arc<Notify>,
    poker: AtomicBool,
    /// The receive side: how many receives wait, the number the listener raises each time
    /// they should claim, and whether it runs.
    waiting: AtomicUsize,
    round: watch::Sender<u64>,
    listener: AtomicBool,
    /// The listener's connection once opened, and how to open one (none: receives poll).
    connection: tokio::sync::Mutex<Option<Arc<dyn RedisClient>>>,
    open: Option<OpenListener>,
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
    }
}

impl Wakes {
    /// Wake-ups through the list `key`, poked on `client`; receives are woken when `open`
    /// gives a listener's connection, and poll otherwise.
    pub(crate) fn new(
        client: Arc<dyn RedisClient>,
        key: String,
        refresh: Duration,
        open: Option<OpenListener>,
    ) -> Self {
        Wakes {
            client,
            key,
            refresh,
            pending: AtomicBool::new(false),
            poke: Arc::new(Notify::new()),
            poker: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
            round: watch::Sender::new(0),
            listener: AtomicBool::new(false),
            connection: tokio::sync::Mutex::new(None),
            open,
            next_due: AtomicU64::new(0),
            claims: watch::Sender::new(0),
            empty_in: AtomicU64::new(0),
            failure: Mutex::new(None),
        }
    }

    /// How this driver opens a listener's connection, for a new instance on the same queue.
    pub(crate) fn opener(&self) -> Option<OpenListener> {
        self.open.clone()
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

    /// Asks for a poke of the wake list; the poker task sends it. Starts the task once.
    pub(crate) fn poke(self: &Arc<Self>) {
        self.pending.store(true, Ordering::Release);
        self.poke.notify_one();
        if self.poker.swap(true, Ordering::AcqRel) {
            return;
        }
        let notify = self.poke.clone();
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            // Lets a later poke start another task when this one's runtime shuts down.
            let _running = PokerRunning(weak.clone());
            let mut gap = POKE_GAP;
            let mut failures = 0;
            loop {
                notify.notified().await;
                let Some(wakes) = weak.upgrade() else { return };
                if wakes.pending.swap(false, Ordering::AcqRel) {
                    gap = match wakes.send_poke().await {
                        Ok(true) => {
                            failures = 0;
                            POKE_GAP
                        }
                        Ok(false) => {
                            failures = 0;
                            (gap * 2).min(LONGEST_POKE_GAP)
                        }
                        Err(e) if e.is_temporary() && failures < POKE_RETRIES => {
                            // Lost on a broken connection: sent again, further apart each time
                            // (for about two seconds in all), so that a send just before a
                            // short outage keeps its poke.
                            failures += 1;
                            wakes.pending.store(true, Ordering::Release);
                            notify.notify_one();
                            (POKE_GAP * (1 << failures)).min(LONGEST_RETRY_GAP)
                        }
                        Err(_) => {
                            failures = 0;
                            POKE_GAP
                        }
                    };
                }
                drop(wakes);
                tokio::time::sleep(gap).await;
            }
        });
    }

    /// Pokes the wake list: whether it put a token in (`false`: the last one was still there).
    async fn send_poke(&self) -> Result<bool, Error> {
        let reply = self
            .client
            .eval(
                Script::Wake,
                &[self.key.as_str()],
                &[TOKEN_TTL_MS.as_bytes()],
            )
            .await?;
        Ok(reply.as_int() != Some(0))
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
