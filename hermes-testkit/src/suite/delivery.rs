//! Scenarios of delivery: a message sent is received whole, by one consumer, and settled as asked.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Driver, Message};
use serde_json::json;
use tokio::time::Instant;

use super::support::*;
use super::{Harness, Outcome};

/// A message sent and received keeps its id, type, payload (key order included), created,
/// execute_at and retries, and comes with the priority it was sent to.
pub async fn round_trip_keeps_every_field<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let sent = Message::builder("round-trip")
        .id(format!("id-{queue}"))
        .payload(&json!({"z": 1, "a": [1, 2.5, "x"], "m": {"k": null, "b": true}}))
        .created(1637617498.172724)
        .execute_at(unix_now() - 5.0)
        .retries(7)
        .build()
        .unwrap();
    send(&driver, &sent, DEFAULT_PRIORITY).await;
    let got = expect_one(&driver, &[]).await;
    assert_eq!(got.message(), &sent);
    assert_eq!(got.priority(), DEFAULT_PRIORITY);
    let keys: Vec<_> = got
        .message()
        .payload()
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["z", "a", "m"], "payload keys keep their order");
    ack(&driver, &got).await;
    Outcome::Passed
}

/// A message given back with `nack` is delivered again.
pub async fn nack_redelivers<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let sent = message("nacked", 1);
    send(&driver, &sent, DEFAULT_PRIORITY).await;
    let d = expect_one(&driver, &[]).await;
    driver.nack(&d).await.expect("nack");
    let again = expect_one(&driver, &[]).await;
    assert_eq!(again.message().id(), sent.id());
    ack(&driver, &again).await;
    expect_none(&driver, &[], Duration::from_millis(300)).await;
    Outcome::Passed
}

/// An acknowledged message is not delivered again, even after the visibility timeout.
pub async fn ack_removes_for_good<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    send(&driver, &message("acked", 1), DEFAULT_PRIORITY).await;
    let d = expect_one(&driver, &[]).await;
    ack(&driver, &d).await;
    let wait = if driver.capabilities().at_least_once {
        h.visibility_timeout() + BRIEF
    } else {
        BRIEF
    };
    expect_none(&driver, &[], wait).await;
    Outcome::Passed
}

/// Four consumers on one queue together receive each of 200 messages exactly once.
pub async fn concurrent_consumers_each_message_once<H: Harness>(h: &H, queue: &str) -> Outcome {
    let n = scaled(h, 200);
    let producer = open(h, queue).await;
    let mut sent = HashSet::new();
    for i in 0..n {
        let m = message("bulk", i);
        sent.insert(m.id().to_owned());
        send(&producer, &m, DEFAULT_PRIORITY).await;
    }
    let received: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut consumers = Vec::new();
    for _ in 0..4 {
        let driver = Arc::new(open(h, queue).await);
        let received = received.clone();
        consumers.push(tokio::spawn(async move {
            let give_up = Instant::now() + Duration::from_secs(120);
            while received.lock().unwrap().len() < n && Instant::now() < give_up {
                if let Some(d) = receive(&*driver, &[], Duration::from_millis(500)).await {
                    received.lock().unwrap().push(d.message().id().to_owned());
                    ack(&*driver, &d).await;
                }
            }
        }));
    }
    for consumer in consumers {
        consumer.await.expect("a consumer panicked");
    }
    let received = received.lock().unwrap();
    let unique: HashSet<_> = received.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        received.len(),
        "some message was delivered twice"
    );
    assert_eq!(unique, sent, "the messages received differ from those sent");
    Outcome::Passed
}

/// A receive on an empty queue returns `None` within its wait (plus a little).
pub async fn empty_receive_returns_within_wait<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    for wait in [Duration::ZERO, Duration::from_secs(1)] {
        let start = Instant::now();
        expect_none(&driver, &[], wait).await;
        let took = start.elapsed();
        assert!(
            took <= wait + Duration::from_millis(1500),
            "a {wait:?} receive took {took:?}"
        );
    }
    Outcome::Passed
}

/// Dropping `receive` futures at any point, waiting or not, loses no message.
pub async fn dropped_receive_loses_nothing<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    // A receive dropped while waiting on an empty queue.
    let _ = tokio::time::timeout(Duration::from_millis(200), driver.receive(&[], PATIENCE)).await;
    let sent = message("survivor", 1);
    send(&driver, &sent, DEFAULT_PRIORITY).await;
    // Receives dropped at ever later points of their work.
    let mut got = Vec::new();
    for step in 0..40u64 {
        let cut = Duration::from_micros(step * step * 40);
        if let Ok(result) = tokio::time::timeout(cut, driver.receive(&[], PATIENCE)).await
            && let Some(d) = result.expect("receiving")
        {
            got.push(d.message().id().to_owned());
            ack(&driver, &d).await;
        }
    }
    if got.is_empty() {
        let wait = if driver.capabilities().at_least_once {
            h.visibility_timeout() * 3 + PATIENCE
        } else {
            PATIENCE
        };
        let d = receive(&driver, &[], wait)
            .await
            .expect("the message was lost");
        got.push(d.message().id().to_owned());
        ack(&driver, &d).await;
    }
    assert_eq!(got, [sent.id().to_owned()]);
    Outcome::Passed
}

/// A message sent by one instance is received by another.
pub async fn sent_by_one_received_by_another<H: Harness>(h: &H, queue: &str) -> Outcome {
    let sender = open(h, queue).await;
    let receiver = open(h, queue).await;
    let sent = message("handover", 1);
    send(&sender, &sent, DEFAULT_PRIORITY).await;
    let d = expect_one(&receiver, &[]).await;
    assert_eq!(d.message(), &sent);
    ack(&receiver, &d).await;
    Outcome::Passed
}
