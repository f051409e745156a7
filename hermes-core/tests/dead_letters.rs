//! The dispatcher keeps messages whose handlers failed for good as dead letters, on the
//! in-memory driver.
//!
//! Every async test captures its log lines, also where it asserts none: a log callsite first
//! met on a thread without a subscriber can stay switched off for the tests that assert lines.

use std::time::Duration;

use hermes_core::inspect::{DeadKind, Replay};
use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, Driver, Emitter, HandlerError, Job, JobContext, Message,
    RetryPolicy, handler_fn,
};
use hermes_testkit::{LogCapture, MemoryDriver};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Charge {
    cents: u32,
}

impl Job for Charge {
    const TYPE: &'static str = "charge";
    fn retry_policy() -> Option<RetryPolicy> {
        Some(RetryPolicy::fixed(Duration::ZERO, 2))
    }
}

#[tokio::test]
async fn a_message_whose_retries_run_out_is_kept_with_its_last_error() {
    let (logs, _guard) = LogCapture::install();
    let driver = MemoryDriver::new();
    let id = Emitter::new(driver.clone())
        .emit_job(&Charge { cents: 100 })
        .await
        .unwrap();
    let mut dispatcher = Dispatcher::new(driver.clone()).max_items(3);
    dispatcher.register_job(|_: Charge, ctx: JobContext| async move {
        Err::<(), _>(format!("card declined on try {}", ctx.retries() + 1))
    });
    dispatcher.handle(&[]).await.unwrap();

    assert!(driver.is_empty(), "nothing waits any more");
    let letters = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 10)
        .await
        .unwrap();
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(letter.id, id);
    assert_eq!(letter.reason.kind, DeadKind::Failed);
    assert_eq!(letter.reason.error, "card declined on try 3");
    assert_eq!(letter.reason.retries, 2);
    assert!(
        letter
            .reason
            .handler
            .as_deref()
            .unwrap()
            .ends_with("{closure}")
    );
    assert_eq!(letter.message.as_ref().unwrap().retries(), 2);
    assert_eq!(
        logs.count_starting_with(&format!(
            "WARN Message #{id} goes to the dead letters - failed"
        )),
        1,
        "{:#?}",
        logs.lines()
    );

    // Replayed, it runs again from retry 0.
    assert_eq!(
        driver
            .dead_letters()
            .unwrap()
            .replay(DEFAULT_PRIORITY, &Replay::all().of_type("charge"))
            .await
            .unwrap(),
        1
    );
    let back = driver
        .receive(&[], Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (back.message().id(), back.message().retries()),
        (id.as_str(), 0)
    );
}

#[tokio::test]
async fn rejected_panicked_and_timed_out_runs_say_why() {
    let (_logs, _capture) = LogCapture::install();
    let driver = MemoryDriver::new();
    let mut dispatcher = Dispatcher::new(driver.clone())
        .max_items(3)
        .time_limit(Duration::from_millis(100));
    dispatcher.register_job(|_: Charge, _| async { Ok::<_, String>(()) });
    dispatcher.register_handler(
        "boom",
        handler_fn(|_m: Message| async { panic!("the ledger is gone") }).named("Ledger"),
    );
    dispatcher.register_fn("slow", |_m| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok::<_, HandlerError>(true)
    });
    let misfit = Message::builder("charge")
        .id("misfit")
        .payload(&serde_json::json!({"cents": "lots"}))
        .build()
        .unwrap();
    for message in [
        misfit,
        Message::builder("boom").id("boom").build().unwrap(),
        Message::builder("slow").id("slow").build().unwrap(),
    ] {
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    }
    dispatcher.handle(&[]).await.unwrap();

    let letters = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 10)
        .await
        .unwrap();
    let reasons: Vec<_> = letters
        .iter()
        .map(|l| (l.id.as_str(), l.reason.kind, l.reason.error.as_str()))
        .collect();
    assert_eq!(reasons[0].0, "misfit");
    assert_eq!(reasons[0].1, DeadKind::Rejected);
    assert!(
        reasons[0].2.contains("cents: invalid type"),
        "{}",
        reasons[0].2
    );
    assert!(!reasons[0].2.contains("lots"));
    assert_eq!(
        reasons[1],
        ("boom", DeadKind::Failed, "panicked: the ledger is gone")
    );
    assert_eq!(
        reasons[2],
        ("slow", DeadKind::Failed, "timed out after 100ms")
    );
    assert_eq!(letters[1].reason.handler.as_deref(), Some("Ledger"));
}

#[tokio::test]
async fn a_message_that_succeeds_or_is_retried_is_no_dead_letter() {
    let (_logs, _capture) = LogCapture::install();
    let driver = MemoryDriver::new();
    let mut dispatcher = Dispatcher::new(driver.clone()).max_items(2);
    dispatcher.register_fn("fine", |_m| async { Ok(true) });
    dispatcher.register_handler(
        "again",
        handler_fn(|_m: Message| async { Err::<bool, _>(HandlerError::msg("later")) })
            .with_retry(RetryPolicy::fixed(Duration::from_secs(600), 1)),
    );
    for t in ["fine", "again"] {
        driver
            .send(&Message::new(t), DEFAULT_PRIORITY)
            .await
            .unwrap();
    }
    dispatcher.handle(&[]).await.unwrap();
    assert!(
        driver
            .dead_letters()
            .unwrap()
            .list(DEFAULT_PRIORITY, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(driver.len(), 1, "the retry copy waits");
}
