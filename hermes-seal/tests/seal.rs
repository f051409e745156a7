//! The sealing serializer on its own: payloads round-trip sealed, compressed or both; keys
//! rotate; a tampered, moved, unknown-key or oversized payload is undecodable with a reason
//! that shows neither key nor payload; the message around the payload stays Hermes' JSON.

use hermes_core::{JsonSerializer, Message, Serializer};
use hermes_seal::{OPENED_LIMIT, SealKey, SealKeys, SealingSerializer, stored_form};
use serde_json::{Value, json};

const SECRET: &str = "someone@example.com";

fn message() -> Message {
    Message::builder("send-email")
        .id("m-1")
        .payload(&json!({"to": SECRET, "lines": ["a", "b"], "n": 12}))
        .build()
        .unwrap()
}

fn keys(id: &str) -> SealKeys {
    SealKeys::new(SealKey::generate(id).unwrap())
}

/// The bytes with the `data` of the `$hermes` payload passed through `change`.
fn with_data(bytes: &[u8], change: impl FnOnce(&mut String)) -> Vec<u8> {
    let mut value: Value = serde_json::from_slice(bytes).unwrap();
    let data = value["message"]["payload"]["$hermes"]["data"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut data = data;
    change(&mut data);
    value["message"]["payload"]["$hermes"]["data"] = Value::String(data);
    serde_json::to_vec(&value).unwrap()
}

#[test]
fn a_sealed_payload_round_trips_and_hides_its_content() {
    let serializer = SealingSerializer::new(keys("k1"));
    let bytes = serializer.serialize(&message()).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(!text.contains(SECRET), "{text}");
    // Hermes' JSON around it: what PHP's decoder and the tools read.
    let outer = JsonSerializer.deserialize(&bytes).unwrap();
    assert_eq!(outer.id(), "m-1");
    assert_eq!(outer.message_type(), "send-email");
    let form = stored_form(outer.payload()).expect("a payload in stored form");
    assert_eq!(form.key.as_deref(), Some("k1"));
    assert!(!form.compressed);
    let back = serializer.deserialize(&bytes).unwrap();
    assert_eq!(back.payload(), message().payload());
    assert_eq!(back.id(), "m-1");
    // Two seals of one message differ (a nonce each).
    assert_ne!(bytes, serializer.serialize(&message()).unwrap());
}

#[test]
fn keys_rotate_and_an_unknown_key_is_named_without_the_key() {
    let old = SealKey::generate("2026-06").unwrap();
    let before = SealingSerializer::new(SealKeys::new(old.clone()));
    let sealed_before = before.serialize(&message()).unwrap();
    let after = SealingSerializer::new(keys("2026-12").keep_for_reading(old.clone()));
    assert_eq!(
        after.deserialize(&sealed_before).unwrap().payload(),
        message().payload()
    );
    let sealed_after = after.serialize(&message()).unwrap();
    let form = stored_form(JsonSerializer.deserialize(&sealed_after).unwrap().payload()).unwrap();
    assert_eq!(
        form.key.as_deref(),
        Some("2026-12"),
        "new messages use the current key"
    );
    let without_old = SealingSerializer::new(keys("2026-12"));
    let err = without_old.deserialize(&sealed_before).unwrap_err();
    assert!(err.reason().contains("2026-06"), "{err}");
    assert!(err.reason().contains("not kept"), "{err}");
    assert!(!err.to_string().contains(old.to_base64().as_str()));
    assert!(!err.to_string().contains(SECRET));
}

#[test]
fn a_tampered_or_moved_payload_does_not_open() {
    let serializer = SealingSerializer::new(keys("k1"));
    let bytes = serializer.serialize(&message()).unwrap();
    // One character of the ciphertext changed.
    let tampered = with_data(&bytes, |data| {
        let i = data.len() / 2;
        let c = if &data[i..=i] == "A" { "B" } else { "A" };
        data.replace_range(i..=i, c);
    });
    let err = serializer.deserialize(&tampered).unwrap_err();
    assert!(err.reason().contains("does not open"), "{err}");
    // Cut short.
    let short = with_data(&bytes, |data| data.truncate(8));
    assert!(serializer.deserialize(&short).is_err());
    // The sealed payload copied into a message with another id, or relabelled.
    let mut value: Value = serde_json::from_slice(&bytes).unwrap();
    value["message"]["id"] = "m-2".into();
    let moved = serde_json::to_vec(&value).unwrap();
    let err = serializer.deserialize(&moved).unwrap_err();
    assert!(err.reason().contains("another message"), "{err}");
    let mut value: Value = serde_json::from_slice(&bytes).unwrap();
    value["message"]["type"] = "delete-account".into();
    assert!(
        serializer
            .deserialize(&serde_json::to_vec(&value).unwrap())
            .is_err()
    );
    let mut value: Value = serde_json::from_slice(&bytes).unwrap();
    value["message"]["payload"]["$hermes"]["zstd"] = true.into();
    assert!(
        serializer
            .deserialize(&serde_json::to_vec(&value).unwrap())
            .is_err()
    );
    for bytes in [tampered, moved] {
        let err = serializer.deserialize(&bytes).unwrap_err().to_string();
        assert!(!err.contains(SECRET), "{err}");
    }
}

#[test]
fn large_payloads_are_compressed_alone_or_under_the_seal() {
    let big = Message::builder("report")
        .id("big")
        .payload(&json!({"rows": vec!["the same row again"; 2000]}))
        .build()
        .unwrap();
    let plain_len = JsonSerializer.serialize(&big).unwrap().len();
    for serializer in [
        SealingSerializer::compress_only(1024),
        SealingSerializer::new(keys("k1")).compress_over(1024),
    ] {
        let bytes = serializer.serialize(&big).unwrap();
        assert!(
            bytes.len() * 10 < plain_len,
            "{} of {plain_len}",
            bytes.len()
        );
        let form = stored_form(JsonSerializer.deserialize(&bytes).unwrap().payload()).unwrap();
        assert!(form.compressed);
        assert_eq!(
            serializer.deserialize(&bytes).unwrap().payload(),
            big.payload()
        );
        // A small payload stays as it is (compress only) or is sealed uncompressed.
        let small = serializer.serialize(&message()).unwrap();
        let small_payload = JsonSerializer.deserialize(&small).unwrap();
        assert!(stored_form(small_payload.payload()).is_none_or(|f| !f.compressed));
        assert_eq!(
            serializer.deserialize(&small).unwrap().payload(),
            message().payload()
        );
    }
}

#[test]
fn a_payload_that_would_open_past_the_limit_is_refused() {
    let huge = Message::builder("bomb")
        .payload(&json!({"zeros": "0".repeat(OPENED_LIMIT + 1)}))
        .build()
        .unwrap();
    let serializer = SealingSerializer::compress_only(1024);
    let bytes = serializer.serialize(&huge).unwrap();
    assert!(bytes.len() < 100_000, "{}", bytes.len());
    let err = serializer.deserialize(&bytes).unwrap_err();
    assert!(err.reason().contains("within"), "{err}");
}

#[test]
fn plain_payloads_are_read_unless_seals_are_required() {
    let plain = JsonSerializer.serialize(&message()).unwrap();
    let serializer = SealingSerializer::new(keys("k1"));
    assert_eq!(
        serializer.deserialize(&plain).unwrap().payload(),
        message().payload()
    );
    let strict = SealingSerializer::new(keys("k1")).require_sealed();
    let err = strict.deserialize(&plain).unwrap_err();
    assert!(err.reason().contains("not sealed"), "{err}");
    let compressed = SealingSerializer::compress_only(1)
        .serialize(&message())
        .unwrap();
    assert!(strict.deserialize(&compressed).is_err());
    // A sealed payload given to a serializer without keys.
    let sealed = serializer.serialize(&message()).unwrap();
    let err = SealingSerializer::compress_only(1)
        .deserialize(&sealed)
        .unwrap_err();
    assert!(err.reason().contains("holds no keys"), "{err}");
    // No payload: nothing to seal.
    let bare = Message::builder("ping").build().unwrap();
    let bytes = serializer.serialize(&bare).unwrap();
    assert_eq!(bytes, JsonSerializer.serialize(&bare).unwrap());
}

#[test]
fn debug_output_shows_no_key() {
    let key = SealKey::generate("k1").unwrap();
    let serializer = SealingSerializer::new(SealKeys::new(key.clone())).compress_over(10);
    let shown = format!("{serializer:?} {key:?}");
    assert!(!shown.contains(key.to_base64().as_str()), "{shown}");
    assert!(shown.contains("k1"), "{shown}");
}
