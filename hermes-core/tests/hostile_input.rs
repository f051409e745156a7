//! Hostile bytes for the decoder: random bytes, invalid UTF-8, deep nesting, huge bodies, wrong
//! field types, huge and non-finite numbers. Nothing panics or hangs, every refusal says why
//! without quoting the input, and what decodes can be checked before it is sent again.

use std::time::{Duration, Instant};

use hermes_core::{JsonSerializer, Serializer};
use proptest::prelude::*;

/// Decodes `bytes`, checking the rules every outcome keeps: a refusal is short and quotes no
/// part of the input; a message that decodes can be encoded again or is refused by `check`.
fn decode_checked(bytes: &[u8]) {
    match JsonSerializer.deserialize(bytes) {
        Ok(message) => {
            if message.check().is_ok() {
                let again = JsonSerializer.serialize(&message).expect("re-encoding");
                let back = JsonSerializer
                    .deserialize(&again)
                    .expect("decoding our own bytes");
                assert_eq!(back.id(), message.id());
            }
        }
        Err(e) => {
            let text = e.to_string();
            assert!(text.len() < 400, "{} bytes of error", text.len());
            assert_eq!(e.len(), bytes.len());
        }
    }
}

fn message_with(field: &str, value: &str) -> String {
    let mut fields = vec![
        ("id", "\"a\"".to_owned()),
        ("type", "\"t\"".to_owned()),
        ("created", "1700000000".to_owned()),
    ];
    match fields.iter_mut().find(|(name, _)| *name == field) {
        Some(slot) => slot.1 = value.to_owned(),
        None => fields.push((
            Box::leak(field.to_owned().into_boxed_str()),
            value.to_owned(),
        )),
    }
    let inner: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    format!("{{\"message\":{{{}}}}}", inner.join(","))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        decode_checked(&bytes);
    }

    #[test]
    fn random_text_in_a_message_shape_never_panics(text in "\\PC{0,64}") {
        decode_checked(format!(r#"{{"message":{{"id":{text},"type":"t","created":1}}}}"#).as_bytes());
        decode_checked(format!(r#"{{"message":{{"id":"a","type":"t","created":{text}}}}}"#).as_bytes());
        decode_checked(format!(r#"{{"message":{{"id":"a","type":"t","created":1,"payload":{text}}}}}"#).as_bytes());
    }

    #[test]
    fn any_field_of_any_json_type_never_panics(
        field in prop::sample::select(vec!["id", "type", "created", "payload", "execute_at", "retries"]),
        value in prop::sample::select(vec![
            "null", "true", "0", "-1", "1e308", "-1e308", "1e400", "-1e400", "1e-400",
            "18446744073709551616", "\"\"", "\"abc\"", "\"1e999\"", "\"NaN\"", "\"-5\"",
            "[]", "{}", "[1,[2,[3]]]", "{\"a\":{}}",
        ]),
    ) {
        decode_checked(message_with(field, value).as_bytes());
    }
}

#[test]
fn invalid_utf8_is_refused() {
    for bytes in [
        &b"\xff\xfe"[..],
        b"{\"message\":{\"id\":\"\xc3\x28\",\"type\":\"t\",\"created\":1}}",
        b"{\"message\":{\"id\":\"a\",\"type\":\"\xed\xa0\x80\",\"created\":1}}",
    ] {
        assert!(JsonSerializer.deserialize(bytes).is_err());
        decode_checked(bytes);
    }
}

#[test]
fn nesting_100000_deep_is_refused_without_overflowing_the_stack() {
    let depth = 100_000;
    for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
        let body = format!(
            r#"{{"message":{{"id":"a","type":"t","created":1,"payload":{}1{}}}}}"#,
            open.repeat(depth),
            close.repeat(depth)
        );
        let err = JsonSerializer.deserialize(body.as_bytes()).unwrap_err();
        assert!(err.reason().contains("invalid JSON"), "{err}");
    }
}

#[test]
fn a_10_mb_body_decodes_in_bounded_time() {
    let blob = "x".repeat(10 * 1024 * 1024);
    let body = format!(
        r#"{{"message":{{"id":"a","type":"t","created":1,"payload":{{"blob":"{blob}"}}}}}}"#
    );
    let started = Instant::now();
    let message = JsonSerializer.deserialize(body.as_bytes()).unwrap();
    assert_eq!(
        message.payload().unwrap()["blob"].as_str().unwrap().len(),
        blob.len()
    );
    let truncated = &body.as_bytes()[..body.len() - 3];
    let err = JsonSerializer.deserialize(truncated).unwrap_err();
    assert!(err.to_string().len() < 400);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn huge_and_non_finite_numbers_are_refused_or_kept_finite() {
    for created in ["1e400", "-1e400", "\"1e999\"", "\"NaN\"", "\"inf\""] {
        assert!(
            JsonSerializer
                .deserialize(message_with("created", created).as_bytes())
                .is_err(),
            "created {created}"
        );
    }
    // A JSON number out of range makes the body invalid JSON, whatever field holds it.
    assert!(
        JsonSerializer
            .deserialize(message_with("execute_at", "1e400").as_bytes())
            .is_err()
    );
    for at in ["\"1e999\"", "\"NaN\""] {
        let m = JsonSerializer
            .deserialize(message_with("execute_at", at).as_bytes())
            .unwrap();
        assert_eq!(m.execute_at(), None, "execute_at {at}");
    }
    // Finite but past the year 9999: decoded, then refused before it is sent again.
    let m = JsonSerializer
        .deserialize(message_with("execute_at", "1e300").as_bytes())
        .unwrap();
    assert!(m.check().is_err());
    let m = JsonSerializer
        .deserialize(message_with("retries", "1e300").as_bytes())
        .unwrap();
    assert_eq!(m.retries(), u32::MAX);
}
