//! Scenarios of payloads: PHP's bytes, large, oversized, Unicode and hostile bodies.

use std::time::Duration;

use hermes_core::{DEFAULT_PRIORITY, Driver, Error, JsonSerializer, Message, Serializer};
use serde_json::json;

use super::support::*;
use super::{Harness, Outcome};

/// A message as PHP Hermes writes it: `/` escaped, non-ASCII as `\u` escapes.
const PHP_JSON: &str = r#"{"message":{"id":"php-1","type":"send-email","created":1637617498.172724,"payload":{"to":"a\/b@x.sk","name":"\u017dlt\u00fd k\u00f4\u0148"},"execute_at":null,"retries":0}}"#;

/// The bytes PHP Hermes writes for the message [`php_json_in_hermes_json_out`] sends.
const HERMES_JSON: &str = r#"{"message":{"id":"rust-1","type":"send-email","created":1700000000,"payload":{"to":"a\/b@x.sk","name":"\u017dlt\u00fd k\u00f4\u0148"},"execute_at":1700000100.5,"retries":3}}"#;

/// PHP and Rust share a queue: a message PHP Hermes wrote, put on the queue as raw bytes, is
/// delivered with every field as PHP wrote it, and a message the driver sends lies on the queue
/// as exactly the bytes PHP Hermes writes for it (Hermes' JSON), and nothing else.
pub async fn php_json_in_hermes_json_out<H: Harness>(h: &H, queue: &str) -> Outcome {
    if !h.carries_raw(PHP_JSON.as_bytes()) {
        return Outcome::Skipped("the harness cannot push PHP's JSON unchanged".to_owned());
    }
    let payload = json!({"to": "a/b@x.sk", "name": "Žltý kôň"});
    let worker = open(h, queue).await;
    h.push_raw(queue, PHP_JSON.as_bytes())
        .await
        .expect("pushing PHP's JSON");
    let got = expect_one(&worker, &[]).await;
    let php = Message::builder("send-email")
        .id("php-1")
        .created(1637617498.172724)
        .payload(&payload)
        .build()
        .unwrap();
    assert_eq!(got.message(), &php, "PHP's message, field by field");
    let m = got.message();
    assert_eq!((m.execute_at(), m.retries()), (None, 0));
    let keys: Vec<_> = m.payload().unwrap().as_object().unwrap().keys().collect();
    assert_eq!(keys, ["to", "name"], "payload keys keep their order");
    assert_eq!(got.priority(), DEFAULT_PRIORITY);
    ack(&worker, &got).await;
    // A worker that is done gives back what it took ahead, as the dispatcher has it do.
    worker.flush().await.expect("flushing");

    let emitter = open(h, queue).await;
    let ours = Message::builder("send-email")
        .id("rust-1")
        .created(1700000000.0)
        .payload(&payload)
        .execute_at(1700000100.5)
        .retries(3)
        .build()
        .unwrap();
    send(&emitter, &ours, DEFAULT_PRIORITY).await;
    let raw = h
        .pull_raw(queue)
        .await
        .expect("pulling raw bytes")
        .expect("the message sent is not on the queue");
    assert_eq!(
        String::from_utf8_lossy(&raw),
        HERMES_JSON,
        "the bytes on the queue are not Hermes' JSON"
    );
    assert_eq!(
        raw,
        JsonSerializer.serialize(&ours).expect("encoding"),
        "the bytes on the queue are not what JsonSerializer writes"
    );
    if let Some(more) = h.pull_raw(queue).await.expect("pulling raw bytes") {
        panic!(
            "after one send, a second body of {} bytes is on the queue",
            more.len()
        );
    }
    Outcome::Passed
}

/// Input that cannot be decoded never reaches the caller as a message, is reported once, is
/// kept in quarantine, and the next message still arrives.
pub async fn undecodable_input_is_quarantined<H: Harness>(h: &H, queue: &str) -> Outcome {
    expect_each_quarantined(h, queue, &[b"{\"message\": not json, secret-token"]).await;
    Outcome::Passed
}

/// A 200 KB payload arrives whole (or is refused as too large by a driver that declares a
/// smaller limit).
pub async fn large_payload_round_trip<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let blob: String = (0..200_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let sent = Message::builder("large")
        .payload(&json!({ "blob": blob }))
        .build()
        .unwrap();
    if driver
        .capabilities()
        .max_payload
        .is_some_and(|max| max < 200_200)
    {
        return Outcome::Skipped("the driver's payload limit is below 200 KB".into());
    }
    send(&driver, &sent, DEFAULT_PRIORITY).await;
    let d = expect_one(&driver, &[]).await;
    assert_eq!(d.message(), &sent);
    ack(&driver, &d).await;
    Outcome::Passed
}

/// A message over the driver's declared limit is refused with `PayloadTooLarge`, and the
/// queue goes on working.
pub async fn oversized_payload_rejected<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let Some(max) = driver.capabilities().max_payload else {
        return Outcome::lacks("max_payload");
    };
    let sent = Message::builder("huge")
        .payload(&json!({ "blob": "x".repeat(max + 1) }))
        .build()
        .unwrap();
    let err = driver.send(&sent, DEFAULT_PRIORITY).await.unwrap_err();
    assert!(matches!(err, Error::PayloadTooLarge { .. }), "{err}");
    expect_none(&driver, &[], Duration::from_millis(300)).await;
    let after = message("after", 1);
    send(&driver, &after, DEFAULT_PRIORITY).await;
    let d = expect_one(&driver, &[]).await;
    assert_eq!(d.message().id(), after.id());
    ack(&driver, &d).await;
    Outcome::Passed
}

/// Payloads, types and ids in any script, with quotes, slashes and control characters, arrive
/// unchanged.
pub async fn unicode_payload_round_trip<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let sent = Message::builder("typ-é/\"ü\"")
        .id("id-žluťoučký-😀")
        .payload(&json!({
            "sk": "Žltý kôň úpel ďábelské ódy",
            "emoji": "😀👍🏽🇸🇰",
            "cjk": "漢字かなカナ한국어",
            "rtl": "שלום مرحبا",
            "tricky": "a/b\\c\"d\u{0}\u{1f}\u{7f}\u{2028}",
            "ключ": ["ünïcödé", 1.5, -0.25, 1e-7, 12345678901234567i64],
        }))
        .build()
        .unwrap();
    send(&driver, &sent, DEFAULT_PRIORITY).await;
    let d = expect_one(&driver, &[]).await;
    assert_eq!(d.message(), &sent);
    ack(&driver, &d).await;
    Outcome::Passed
}

/// Hostile bodies put on the queue directly (invalid UTF-8, nesting 100,000 deep, wrong field
/// types, a number out of range, a top level that is not an object) never reach a handler and
/// stop nothing: each is reported undecodable and quarantined, and the good message behind them
/// is delivered.
pub async fn hostile_inputs_are_quarantined<H: Harness>(h: &H, queue: &str) -> Outcome {
    let deep = format!(
        r#"{{"message":{{"id":"deep","type":"t","created":1,"payload":{}1{}}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let hostile: [&[u8]; 6] = [
        b"\xff\xfe{\"message\": not json",
        deep.as_bytes(),
        br#"{"message":{"id":5,"type":"t","created":1}}"#,
        br#"{"message":{"id":"a","type":{"x":1},"created":1}}"#,
        br#"{"message":{"id":"a","type":"t","created":1e400}}"#,
        br#"[{"message":{"id":"a","type":"t","created":1}}]"#,
    ];
    expect_each_quarantined(h, queue, &hostile).await;
    Outcome::Passed
}
