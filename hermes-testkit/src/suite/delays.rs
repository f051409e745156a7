//! Scenarios of delays: never delivered before due, whoever put the message on the queue.

use std::time::Duration;

use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, JsonSerializer, Message, Serializer};

use super::support::*;
use super::{Harness, Outcome};

/// A message due in the future is not delivered before it is due, and is delivered once due.
pub async fn delayed_message_waits_until_due<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    if !driver.capabilities().delay {
        return Outcome::lacks("delay");
    }
    let delayed = Message::builder("delayed")
        .delay(Duration::from_secs(3))
        .build()
        .unwrap();
    let due = delayed.execute_at().unwrap();
    send(&driver, &delayed, DEFAULT_PRIORITY).await;
    send(&driver, &message("now", 1), DEFAULT_PRIORITY).await;
    let first = expect_one(&driver, &[]).await;
    assert_eq!(
        first.message().message_type(),
        "now",
        "the due message comes first"
    );
    ack(&driver, &first).await;
    expect_none(&driver, &[], Duration::from_secs(1)).await;
    let d = expect_one(&driver, &[]).await;
    let now = unix_now();
    assert_eq!(d.message().id(), delayed.id());
    assert!(now >= due - 0.001, "delivered {:.3}s early", due - now);
    ack(&driver, &d).await;
    Outcome::Passed
}

/// A body put on the queue directly, as a foreign producer or an emitter that ignores delays
/// would, whose `execute_at` is still ahead, is not delivered before it is due, then once.
pub async fn raw_body_due_later_waits<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    if !driver.capabilities().delay {
        return Outcome::lacks("delay");
    }
    let early = Message::builder("raw-early")
        .delay(Duration::from_millis(2500))
        .build()
        .unwrap();
    let due = early.execute_at().unwrap();
    let body = JsonSerializer.serialize(&early).expect("encoding");
    h.push_raw(queue, &body).await.expect("pushing raw bytes");
    let now = message("raw-now", 1);
    send(&driver, &now, DEFAULT_PRIORITY).await;
    let first = expect_one(&driver, &[]).await;
    assert_eq!(
        first.message().id(),
        now.id(),
        "the due message comes first"
    );
    ack(&driver, &first).await;
    let d = receive(&driver, &[], PATIENCE)
        .await
        .expect("the early body was never delivered");
    let at = unix_now();
    assert_eq!(d.message().id(), early.id());
    assert!(
        at >= due - 0.001,
        "delivered {:.3}s before it was due",
        due - at
    );
    ack(&driver, &d).await;
    expect_none(&driver, &[], BRIEF).await;
    Outcome::Passed
}

/// A message due after the year 9999 is refused with `InvalidMessage` (no backend orders such
/// times), and nothing is sent.
pub async fn due_time_past_year_9999_refused<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let wire = format!(
        r#"{{"message":{{"id":"far-{queue}","type":"far","created":1700000000,"payload":null,"execute_at":1e300,"retries":0}}}}"#
    );
    let far = JsonSerializer
        .deserialize(wire.as_bytes())
        .expect("a decodable message");
    for result in [
        driver.send(&far, DEFAULT_PRIORITY).await,
        driver
            .send_batch(std::slice::from_ref(&far), DEFAULT_PRIORITY)
            .await,
    ] {
        let err = result.expect_err("a due time after 9999 was accepted");
        assert!(matches!(err, Error::InvalidMessage(_)), "{err}");
    }
    let after = message("after", 1);
    send(&driver, &after, DEFAULT_PRIORITY).await;
    let d = expect_one(&driver, &[]).await;
    assert_eq!(d.message().id(), after.id());
    ack(&driver, &d).await;
    expect_none(&driver, &[], Duration::from_millis(300)).await;
    Outcome::Passed
}
