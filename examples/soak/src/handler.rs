//! The handler every worker runs: it takes 5–50 ms, checks the message, and appends one line
//! to the run's log with a single `O_APPEND` write, saying when it started and ended.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hermes_core::{Handler, HandlerError, Message, async_trait};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::args::Sabotage;
use crate::payload;

/// One line of the log: `<seq> <message id> <worker> ok|corrupt <start> <end>`, the run's
/// span in microseconds since the Unix epoch; the sequence number is `-` when none could be
/// read.
pub fn log_line(seq: Option<u64>, id: &str, worker: &str, intact: bool, span: Span) -> String {
    let seq = seq.map_or_else(|| "-".to_owned(), |s| s.to_string());
    let state = if intact { "ok" } else { "corrupt" };
    format!("{seq} {id} {worker} {state} {} {}\n", span.start, span.end)
}

/// When a handler ran, in microseconds since the Unix epoch (one clock for every process on
/// the machine).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// When the handler started.
    pub start: u64,
    /// When it ended.
    pub end: u64,
}

/// Now, in microseconds since the Unix epoch.
pub fn micros_now() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
}

/// Handles the run's messages for one worker.
#[derive(Debug)]
pub struct SoakHandler {
    log: File,
    worker: String,
    rng: Mutex<StdRng>,
    frozen: Option<Arc<AtomicBool>>,
    sabotage: Sabotage,
    handled: AtomicU64,
}

impl SoakHandler {
    /// A handler appending to `log` as `worker`, its durations drawn from `seed`.
    ///
    /// # Errors
    /// When the log cannot be opened.
    pub fn new(log: &Path, worker: String, seed: u64) -> io::Result<Self> {
        Ok(SoakHandler {
            log: OpenOptions::new().create(true).append(true).open(log)?,
            worker,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            frozen: None,
            sabotage: Sabotage::default(),
            handled: AtomicU64::new(0),
        })
    }

    /// Puts in `sabotage`'s faults (an exit applies to worker processes only).
    pub fn sabotaged(mut self, sabotage: Sabotage) -> Self {
        self.sabotage = sabotage;
        self
    }

    /// While `frozen` is set, the next handler to start blocks its thread, and with it the
    /// whole single-threaded runtime of an in-process worker: the stand-in for SIGSTOP.
    pub fn freezable(mut self, frozen: Arc<AtomicBool>) -> Self {
        self.frozen = Some(frozen);
        self
    }
}

#[async_trait]
impl Handler for SoakHandler {
    async fn handle(&self, message: &Message) -> Result<bool, HandlerError> {
        let start = micros_now();
        let millis = self.rng.lock().expect("not poisoned").random_range(5..=50);
        tokio::time::sleep(Duration::from_millis(millis)).await;
        while self
            .frozen
            .as_ref()
            .is_some_and(|f| f.load(Ordering::SeqCst))
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        let (seq, intact) = match payload::verify(message) {
            Ok(seq) => (Some(seq), true),
            Err(seq) => (seq, false),
        };
        let handled = self.handled.fetch_add(1, Ordering::SeqCst) + 1;
        if self
            .sabotage
            .sabotage_lose_every
            .is_some_and(|n| handled.is_multiple_of(n.max(1)))
        {
            return Ok(true);
        }
        let span = Span {
            start,
            end: micros_now(),
        };
        let line = log_line(seq, message.id(), &self.worker, intact, span);
        // One write of a short line to a file opened with O_APPEND: lines of concurrent
        // writers never interleave.
        let written = (&self.log).write(line.as_bytes())?;
        if written != line.len() {
            return Err(HandlerError::msg("the log line was written in part"));
        }
        if self.sabotage.sabotage_exit_after == Some(handled) {
            std::process::exit(0);
        }
        Ok(true)
    }

    fn name(&self) -> std::borrow::Cow<'static, str> {
        "soak".into()
    }
}
