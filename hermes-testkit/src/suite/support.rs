//! What the scenarios share: opening instances, sending and receiving with checks, the
//! priorities they set up, and how long they wait.

use std::time::Duration;

use hermes_core::driver::Delivery;
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, Message, Priority};
use serde_json::json;

use super::Harness;

/// The priority of the `-high` queue the scenarios set up.
pub const HIGH: Priority = 200;
/// The priority of the `-low` queue the scenarios set up.
pub const LOW: Priority = 50;

/// A receive wait long enough for any backend to deliver a message that is there.
pub(super) const PATIENCE: Duration = Duration::from_secs(10);
/// A receive wait for "nothing is there".
pub(super) const BRIEF: Duration = Duration::from_millis(1500);

pub(super) async fn open<H: Harness>(h: &H, queue: &str) -> H::Driver {
    h.open(queue)
        .await
        .unwrap_or_else(|e| panic!("opening a driver on {queue}: {e}"))
}

/// Opens an instance with the `-high` and `-low` priority queues set up, or `None` when the
/// driver has no priorities.
pub(super) async fn open_with_priorities<H: Harness>(h: &H, queue: &str) -> Option<H::Driver> {
    let driver = open(h, queue).await;
    if !driver.capabilities().priorities {
        return None;
    }
    driver
        .setup_priority_queue(&format!("{queue}-high"), HIGH)
        .expect("setting up the high queue");
    driver
        .setup_priority_queue(&format!("{queue}-low"), LOW)
        .expect("setting up the low queue");
    Some(driver)
}

pub(super) fn message(message_type: &str, n: usize) -> Message {
    Message::builder(message_type)
        .payload(&json!({ "n": n }))
        .build()
        .expect("a valid message")
}

pub(super) async fn send(driver: &impl Driver, message: &Message, priority: Priority) {
    driver
        .send(message, priority)
        .await
        .unwrap_or_else(|e| panic!("sending #{}: {e}", message.id()));
}

pub(super) async fn receive(
    driver: &impl Driver,
    priorities: &[Priority],
    wait: Duration,
) -> Option<Delivery> {
    driver
        .receive(priorities, wait)
        .await
        .unwrap_or_else(|e| panic!("receiving: {e}"))
}

pub(super) async fn expect_one(driver: &impl Driver, priorities: &[Priority]) -> Delivery {
    receive(driver, priorities, PATIENCE)
        .await
        .unwrap_or_else(|| panic!("no message arrived within {PATIENCE:?}"))
}

pub(super) async fn ack(driver: &impl Driver, delivery: &Delivery) {
    driver.ack(delivery).await.expect("acknowledging");
}

pub(super) async fn expect_none(driver: &impl Driver, priorities: &[Priority], wait: Duration) {
    if let Some(d) = receive(driver, priorities, wait).await {
        panic!(
            "expected no message, got #{} ({}) retries {}",
            d.message().id(),
            d.message().message_type(),
            d.message().retries()
        );
    }
}

pub(super) fn scaled<H: Harness>(h: &H, n: usize) -> usize {
    ((n as f64 * h.scale()).ceil() as usize).clamp(4, n)
}

/// Pushes each of `inputs` raw, then a good message: each input is reported undecodable once,
/// with a short error that quotes no input, the good message is delivered, nothing comes back,
/// and the quarantine holds the inputs.
pub(super) async fn expect_each_quarantined<H: Harness>(h: &H, queue: &str, inputs: &[&[u8]]) {
    let driver = open(h, queue).await;
    for bytes in inputs {
        h.push_raw(queue, bytes).await.expect("pushing raw bytes");
    }
    let good = message("good", 1);
    send(&driver, &good, DEFAULT_PRIORITY).await;
    let mut undecodable = 0;
    let mut delivered = Vec::new();
    for _ in 0..inputs.len() + 2 {
        match driver.receive(&[], PATIENCE).await {
            Ok(Some(d)) => {
                delivered.push(d.message().id().to_owned());
                ack(&driver, &d).await;
            }
            Ok(None) => break,
            Err(Error::Undecodable { source, .. }) => {
                let text = source.to_string();
                assert!(!text.contains("secret-token"), "the error quotes the input");
                assert!(text.len() < 400, "a long error: {text}");
                undecodable += 1;
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
        if undecodable == inputs.len() && delivered.len() == 1 {
            break;
        }
    }
    assert_eq!(
        undecodable,
        inputs.len(),
        "each undecodable input is reported once"
    );
    assert_eq!(delivered, [good.id().to_owned()]);
    let wait = if driver.capabilities().at_least_once {
        h.visibility_timeout() + BRIEF
    } else {
        BRIEF
    };
    expect_none(&driver, &[], wait).await;
    assert_eq!(
        h.quarantined(queue).await.expect("counting the quarantine"),
        inputs.len()
    );
}

pub(super) async fn driver_send_all(driver: &impl Driver, messages: &[Message]) {
    for m in messages {
        send(driver, m, DEFAULT_PRIORITY).await;
    }
}
