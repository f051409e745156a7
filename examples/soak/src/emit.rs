//! Emitting a run's messages: numbered and checksummed, a tenth of them urgent and a share
//! delayed by up to 2 s, from a few tasks at once, recording which emits returned Ok.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_core::{DEFAULT_PRIORITY, Driver, Emitter, Message};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::ledger::Sent;
use crate::payload::{SOAK, payload};
use crate::target::PRIORITY_HIGH;

/// How many tasks emit at once.
const EMITTERS: u64 = 4;

/// What emitting ended with.
#[derive(Debug, Default)]
pub struct EmitReport {
    /// Emits that returned an error.
    pub failed: u64,
    /// The first error, to show.
    pub first_error: Option<String>,
}

/// Emits `n` messages through `driver`, `delayed_percent` of them delayed, recording each in
/// `sent`.
pub async fn emit_all(
    driver: Arc<dyn Driver>,
    n: u64,
    delayed_percent: u32,
    seed: u64,
    sent: Arc<Mutex<Sent>>,
) -> EmitReport {
    let next = Arc::new(AtomicU64::new(0));
    let report = Arc::new(Mutex::new(EmitReport::default()));
    let tasks: Vec<_> = (0..EMITTERS)
        .map(|task| {
            let emitter = Emitter::from_arc(driver.clone());
            let (next, sent, report) = (next.clone(), sent.clone(), report.clone());
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(seed.rotate_left(17) ^ task);
                loop {
                    let seq = next.fetch_add(1, Ordering::SeqCst);
                    if seq >= n {
                        break;
                    }
                    let (message, priority) = message(seq, delayed_percent, &mut rng);
                    let result = emitter.emit(&message, priority).await;
                    let how = match message.execute_at() {
                        Some(due) => format!("priority {priority}, due at {due:.3}"),
                        None => format!("priority {priority}"),
                    };
                    sent.lock().expect("not poisoned").record(
                        seq,
                        message.id(),
                        result.is_ok(),
                        how,
                    );
                    if let Err(e) = result {
                        {
                            let mut report = report.lock().expect("not poisoned");
                            report.failed += 1;
                            report.first_error.get_or_insert_with(|| e.to_string());
                        }
                        // The broker may be restarting: wait a little rather than spend the
                        // rest of the messages on it.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("an emitter task does not panic");
    }
    Arc::try_unwrap(report)
        .expect("the tasks are done")
        .into_inner()
        .expect("not poisoned")
}

fn message(seq: u64, delayed_percent: u32, rng: &mut StdRng) -> (Message, hermes_core::Priority) {
    let mut builder = Message::builder(SOAK).payload(&payload(seq, rng));
    if rng.random_ratio(delayed_percent, 100) {
        builder = builder.delay(Duration::from_millis(rng.random_range(100..2000)));
    }
    let priority = if rng.random_ratio(1, 10) {
        PRIORITY_HIGH
    } else {
        DEFAULT_PRIORITY
    };
    (builder.build().expect("a valid message"), priority)
}
