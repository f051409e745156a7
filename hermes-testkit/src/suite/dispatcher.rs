//! Scenarios of the dispatcher on the driver: handling, retries, and a slow handler's claim.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_core::time::unix_now;
use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, Driver, Emitter, HandlerError, Message, RetryPolicy, handler_fn,
};

use super::support::*;
use super::{Harness, Outcome};

/// Under the dispatcher, a delivery whose handlers fail produces exactly one delayed copy with
/// the same id, created time and priority and `retries + 1`; after the last retry, none.
pub async fn failing_handler_sends_one_delayed_copy<H: Harness>(h: &H, queue: &str) -> Outcome {
    let (driver, priority) = match open_with_priorities(h, queue).await {
        Some(driver) => (driver, HIGH),
        None => (open(h, queue).await, DEFAULT_PRIORITY),
    };
    let caps = driver.capabilities();
    let driver: Arc<dyn Driver> = Arc::new(driver);
    let original = message("failing", 1);
    send(&driver, &original, priority).await;

    /// The messages the first handler saw, with the time it saw them.
    type Seen = Arc<Mutex<Vec<(Message, f64)>>>;
    let seen: Seen = Arc::default();
    let failing = |seen: Option<Seen>| {
        Arc::new(
            handler_fn(move |m: Message| {
                let seen = seen.clone();
                async move {
                    if let Some(seen) = seen {
                        seen.lock().unwrap().push((m, unix_now()));
                    }
                    Err::<bool, _>(HandlerError::msg("deliberate failure"))
                }
            })
            .with_retry(RetryPolicy::fixed(Duration::from_secs(1), 1)),
        )
    };
    let run_one = || async {
        let mut dispatcher = Dispatcher::from_arc(driver.clone()).max_items(1);
        // Two failing handlers: still one copy per failed delivery.
        dispatcher.register_handler("failing", failing(Some(seen.clone())));
        dispatcher.register_handler("failing", failing(None));
        tokio::time::timeout(PATIENCE, dispatcher.handle(&[priority]))
            .await
            .expect("the dispatcher found no message")
            .expect("the dispatcher failed");
    };
    run_one().await; // the original: fails, sends a copy
    run_one().await; // the copy, found on the same priority: fails at the last retry
    expect_none(&driver, &[], Duration::from_secs(2)).await;

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let (copy, handled_at) = &seen[1];
    assert_eq!(copy.id(), original.id());
    assert_eq!(copy.created(), original.created());
    assert_eq!(copy.payload(), original.payload());
    assert_eq!(copy.retries(), 1);
    let due = copy.execute_at().expect("the copy is delayed");
    assert!(due >= seen[0].1 + 0.9, "the copy waits its backoff");
    if caps.delay {
        assert!(
            *handled_at >= due - 0.001,
            "the copy ran {:.3}s early",
            due - handled_at
        );
    }
    Outcome::Passed
}

/// A dispatcher whose handler runs for 2.5 visibility timeouts keeps the message claimed
/// (it extends the claim by the delivery's lease): a second worker never gets it, and it runs
/// once.
pub async fn dispatcher_keeps_a_slow_handlers_claim<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver: Arc<dyn Driver> = Arc::new(open(h, queue).await);
    if !driver.capabilities().extend || !driver.capabilities().at_least_once {
        return Outcome::lacks("extend");
    }
    send(&driver, &message("slow", 1), DEFAULT_PRIORITY).await;
    let vt = h.visibility_timeout();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let mut dispatcher = Dispatcher::from_arc(driver.clone())
        .concurrency(2)
        .max_items(2);
    dispatcher.register_handler(
        "slow",
        Arc::new(handler_fn(move |_m: Message| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(vt * 2 + vt / 2).await;
                Ok(true)
            }
        })),
    );
    // Never ends on its own (one message, two max items): stopped after the handler finished.
    let _ = tokio::time::timeout(vt * 3 + BRIEF, dispatcher.handle(&[])).await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the slow message ran twice"
    );
    expect_none(&driver, &[], vt + BRIEF).await;
    Outcome::Passed
}

/// The emitter and a dispatcher at concurrency 4 over `Arc<dyn Driver>`: every emitted message
/// is handled once.
pub async fn dispatcher_handles_emitted_messages<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver: Arc<dyn Driver> = Arc::new(open(h, queue).await);
    let n = scaled(h, 40);
    let emitter = Emitter::from_arc(driver.clone());
    let mut sent = HashSet::new();
    for i in 0..n {
        let m = message("job", i);
        sent.insert(m.id().to_owned());
        emitter.emit(&m, DEFAULT_PRIORITY).await.expect("emit");
    }
    let handled: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut dispatcher = Dispatcher::from_arc(driver.clone())
        .concurrency(4)
        .max_items(n as u64);
    let record = handled.clone();
    dispatcher.register_handler(
        "job",
        Arc::new(handler_fn(move |m: Message| {
            let record = record.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                record.lock().unwrap().push(m.id().to_owned());
                Ok(true)
            }
        })),
    );
    tokio::time::timeout(Duration::from_secs(120), dispatcher.handle(&[]))
        .await
        .expect("the dispatcher did not finish")
        .expect("the dispatcher failed");
    let handled = handled.lock().unwrap();
    let unique: HashSet<_> = handled.iter().cloned().collect();
    assert_eq!(unique.len(), handled.len(), "a message was handled twice");
    assert_eq!(unique, sent);
    Outcome::Passed
}
