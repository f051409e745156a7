//! Scenarios of priorities: the highest first, filters, unknown priorities, order within one.

use std::time::Duration;

use hermes_core::{DEFAULT_PRIORITY, Driver, Error, Message};
use serde_json::json;

use super::support::*;
use super::{Harness, Outcome};

/// Sending to a priority without a queue, and receiving with a filter naming one, fail with
/// `UnknownPriority`; nothing is sent.
pub async fn unknown_priority_fails<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let err = driver.send(&message("t", 1), 12345).await.unwrap_err();
    assert!(matches!(err, Error::UnknownPriority(12345)), "send: {err}");
    let err = driver.receive(&[12345], BRIEF).await.unwrap_err();
    assert!(
        matches!(err, Error::UnknownPriority(12345)),
        "receive: {err}"
    );
    let err = driver
        .receive(&[DEFAULT_PRIORITY, 777], BRIEF)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownPriority(777)), "receive: {err}");
    expect_none(&driver, &[], Duration::from_millis(200)).await;
    Outcome::Passed
}

/// With messages waiting on several priorities, the highest priority comes first.
pub async fn highest_priority_first<H: Harness>(h: &H, queue: &str) -> Outcome {
    let Some(driver) = open_with_priorities(h, queue).await else {
        return Outcome::lacks("priorities");
    };
    send(&driver, &message("low", 1), LOW).await;
    send(&driver, &message("default", 2), DEFAULT_PRIORITY).await;
    send(&driver, &message("high", 3), HIGH).await;
    let mut order = Vec::new();
    for _ in 0..3 {
        let d = expect_one(&driver, &[]).await;
        order.push((d.message().message_type().to_owned(), d.priority()));
        ack(&driver, &d).await;
    }
    assert_eq!(
        order,
        [
            ("high".to_owned(), HIGH),
            ("default".to_owned(), DEFAULT_PRIORITY),
            ("low".to_owned(), LOW)
        ]
    );
    Outcome::Passed
}

/// A receive filtered to some priorities takes nothing from the others.
pub async fn priority_filter<H: Harness>(h: &H, queue: &str) -> Outcome {
    let Some(driver) = open_with_priorities(h, queue).await else {
        return Outcome::lacks("priorities");
    };
    send(&driver, &message("high", 1), HIGH).await;
    send(&driver, &message("default", 2), DEFAULT_PRIORITY).await;
    let d = expect_one(&driver, &[DEFAULT_PRIORITY, LOW]).await;
    assert_eq!(d.message().message_type(), "default");
    assert_eq!(d.priority(), DEFAULT_PRIORITY);
    ack(&driver, &d).await;
    expect_none(&driver, &[DEFAULT_PRIORITY, LOW], BRIEF).await;
    let d = expect_one(&driver, &[HIGH]).await;
    assert_eq!(d.message().message_type(), "high");
    assert_eq!(d.priority(), HIGH);
    ack(&driver, &d).await;
    Outcome::Passed
}

/// Messages of one priority come out in the order they were sent.
pub async fn fifo_within_priority<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    if !driver.capabilities().fifo {
        return Outcome::lacks("fifo");
    }
    let n = scaled(h, 20);
    for i in 0..n {
        send(&driver, &message("fifo", i), DEFAULT_PRIORITY).await;
    }
    for i in 0..n {
        let d = expect_one(&driver, &[]).await;
        assert_eq!(
            d.message().payload().unwrap()["n"],
            json!(i),
            "message {i} out of order"
        );
        ack(&driver, &d).await;
    }
    Outcome::Passed
}

/// A delayed message sent to a priority comes back on that priority.
pub async fn delayed_message_keeps_priority<H: Harness>(h: &H, queue: &str) -> Outcome {
    let Some(driver) = open_with_priorities(h, queue).await else {
        return Outcome::lacks("priorities");
    };
    if !driver.capabilities().delay {
        return Outcome::lacks("delay");
    }
    let delayed = Message::builder("delayed-high")
        .delay(Duration::from_secs(1))
        .build()
        .unwrap();
    send(&driver, &delayed, HIGH).await;
    let d = expect_one(&driver, &[HIGH]).await;
    assert_eq!(d.message().id(), delayed.id());
    assert_eq!(d.priority(), HIGH);
    ack(&driver, &d).await;
    expect_none(&driver, &[], Duration::from_millis(300)).await;
    Outcome::Passed
}
