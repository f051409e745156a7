//! Hermes' JSON format, byte for byte, and every decoding rule.

use hermes_core::{JsonSerializer, Message, Serializer};
use proptest::prelude::*;
use serde_json::json;

const PHP_SEND_EMAIL: &str = r#"{"message":{"id":"id-1","type":"send-email","created":1637617498.172724,"payload":{"to":"a\/b@x.sk","name":"\u017dlt\u00fd k\u00f4\u0148","n":1,"f":1.5,"list":[1,2]},"execute_at":null,"retries":0}}"#;
const PHP_DELAYED_RETRY: &str = r#"{"message":{"id":"id-2","type":"t","created":1700000000,"payload":[],"execute_at":1700000100.5,"retries":3}}"#;

fn decode(bytes: &str) -> Result<Message, hermes_core::DecodeError> {
    JsonSerializer.deserialize(bytes.as_bytes())
}

fn encode(message: &Message) -> String {
    String::from_utf8(JsonSerializer.serialize(message).unwrap()).unwrap()
}

#[test]
fn php_output_decodes_to_its_fields() {
    let m = decode(PHP_SEND_EMAIL).unwrap();
    assert_eq!(m.id(), "id-1");
    assert_eq!(m.message_type(), "send-email");
    assert_eq!(m.created(), 1637617498.172724);
    assert_eq!(
        m.payload().unwrap(),
        &json!({"to": "a/b@x.sk", "name": "Žltý kôň", "n": 1, "f": 1.5, "list": [1, 2]})
    );
    assert_eq!(m.execute_at(), None);
    assert_eq!(m.retries(), 0);

    let m = decode(PHP_DELAYED_RETRY).unwrap();
    assert_eq!(m.id(), "id-2");
    assert_eq!(m.created(), 1700000000.0);
    assert_eq!(m.payload().unwrap(), &json!([]));
    assert_eq!(m.execute_at(), Some(1700000100.5));
    assert_eq!(m.retries(), 3);
}

#[test]
fn php_output_is_reproduced_byte_for_byte() {
    for php in [PHP_SEND_EMAIL, PHP_DELAYED_RETRY] {
        assert_eq!(encode(&decode(php).unwrap()), php);
    }
}

#[test]
fn built_messages_encode_as_php_would() {
    let m = Message::builder("send-email")
        .id("id-1")
        .created(1637617498.172724)
        .payload(&json!({"to": "a/b@x.sk", "name": "Žltý kôň", "n": 1, "f": 1.5, "list": [1, 2]}))
        .build()
        .unwrap();
    assert_eq!(encode(&m), PHP_SEND_EMAIL);
    let m = Message::builder("t")
        .id("id-2")
        .created(1700000000.0)
        .payload(&json!([]))
        .execute_at(1700000100.5)
        .retries(3)
        .build()
        .unwrap();
    assert_eq!(encode(&m), PHP_DELAYED_RETRY);
}

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// [`PHP_DELAYED_RETRY`] with a traceparent: one more key after `retries`.
fn delayed_retry_with(traceparent: &str) -> String {
    PHP_DELAYED_RETRY.replace(
        ",\"retries\":3}}",
        &format!(",\"retries\":3,\"traceparent\":{traceparent}}}}}"),
    )
}

#[test]
fn a_traceparent_is_one_more_key_after_retries() {
    let m = Message::builder("t")
        .id("id-2")
        .created(1700000000.0)
        .payload(&json!([]))
        .execute_at(1700000100.5)
        .retries(3)
        .traceparent(TRACEPARENT)
        .build()
        .unwrap();
    let with = delayed_retry_with(&format!("\"{TRACEPARENT}\""));
    assert_eq!(encode(&m), with);
    let back = decode(&with).unwrap();
    assert_eq!(back, m);
    assert_eq!(back.traceparent(), Some(TRACEPARENT));
    assert_eq!(encode(&back), with);
    // Its retry copy and its replay carry it on.
    assert!(encode(&m.retry_copy(1700000200.0)).contains(TRACEPARENT));
    assert!(encode(&m.replay_copy(false)).contains(TRACEPARENT));
}

#[test]
fn without_a_traceparent_the_bytes_are_phps() {
    for php in [PHP_SEND_EMAIL, PHP_DELAYED_RETRY] {
        let m = decode(php).unwrap();
        assert_eq!(m.traceparent(), None);
        assert_eq!(encode(&m), php);
        assert!(!encode(&m).contains("traceparent"));
    }
    assert!(!encode(&Message::new("t")).contains("traceparent"));
}

#[test]
fn an_invalid_or_non_string_traceparent_is_ignored_and_the_message_kept() {
    for value in [
        "null".to_owned(),
        "1".to_owned(),
        "true".to_owned(),
        "[]".to_owned(),
        format!("[\"{TRACEPARENT}\"]"),
        format!("{{\"traceparent\":\"{TRACEPARENT}\"}}"),
        "\"\"".to_owned(),
        "\"junk\"".to_owned(),
        format!("\"{}\"", TRACEPARENT.to_uppercase()),
        format!("\"01{}\"", &TRACEPARENT[2..]),
        format!("\"{TRACEPARENT}-00\""),
        "\"00-00000000000000000000000000000000-00f067aa0ba902b7-01\"".to_owned(),
        "\"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01\"".to_owned(),
        "\"00-4bf92f3577b34da6a3ce929d0e0e47\\u00e9-00f067aa0ba902b7-01\"".to_owned(),
    ] {
        let bytes = delayed_retry_with(&value);
        let m = decode(&bytes).unwrap_or_else(|e| panic!("{value}: {e}"));
        assert_eq!(m.traceparent(), None, "{value}");
        assert_eq!(m.id(), "id-2");
        assert_eq!(m.retries(), 3);
        assert_eq!(m.execute_at(), Some(1700000100.5));
        assert_eq!(encode(&m), PHP_DELAYED_RETRY, "{value}");
    }
}

#[test]
fn payload_keys_keep_the_order_they_were_written_in() {
    let json = r#"{"message":{"id":"x","type":"t","created":1,"payload":{"zeta":1,"alpha":2,"mid":{"b":1,"a":2}},"execute_at":null,"retries":0}}"#;
    let m = decode(json).unwrap();
    let keys: Vec<_> = m
        .payload()
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["zeta", "alpha", "mid"]);
    assert_eq!(encode(&m), json);
}

#[test]
fn whole_number_floats_have_no_fraction() {
    let m = Message::builder("t")
        .id("x")
        .created(1700000000.0)
        .execute_at(1700000060.0)
        .payload(&json!({"f": 2.0}))
        .build()
        .unwrap();
    let text = encode(&m);
    assert!(text.contains(r#""created":1700000000,"#), "{text}");
    assert!(text.contains(r#""execute_at":1700000060,"#), "{text}");
    assert!(text.contains(r#"{"f":2}"#), "{text}");
}

#[test]
fn missing_or_null_required_fields_are_errors() {
    let cases = [
        (
            r#"{"message":{"id":"x","created":1}}"#,
            "message.type is missing",
        ),
        (
            r#"{"message":{"id":"x","type":null,"created":1}}"#,
            "message.type is missing",
        ),
        (
            r#"{"message":{"type":"t","created":1}}"#,
            "message.id is missing",
        ),
        (
            r#"{"message":{"id":null,"type":"t","created":1}}"#,
            "message.id is missing",
        ),
        (
            r#"{"message":{"id":"x","type":"t"}}"#,
            "message.created is missing",
        ),
        (
            r#"{"message":{"id":"x","type":"t","created":null}}"#,
            "message.created is missing",
        ),
        (
            r#"{"message":{"id":"x","type":"t","created":"soon"}}"#,
            "message.created is not a number",
        ),
        (
            r#"{"message":{"id":7,"type":"t","created":1}}"#,
            "message.id is not a string",
        ),
        (
            r#"{"message":{"id":"x","type":["t"],"created":1}}"#,
            "message.type is not a string",
        ),
        (
            r#"{"id":"x","type":"t","created":1}"#,
            "\"message\" is missing or not an object",
        ),
        (
            r#"{"message":"x"}"#,
            "\"message\" is missing or not an object",
        ),
    ];
    for (json, reason) in cases {
        let err = decode(json).unwrap_err();
        assert_eq!(err.reason(), reason, "{json}");
    }
}

#[test]
fn a_payload_that_is_not_an_object_or_array_becomes_none() {
    for payload in [r#""text""#, "5", "true", "null"] {
        let json =
            format!(r#"{{"message":{{"id":"x","type":"t","created":1,"payload":{payload}}}}}"#);
        assert_eq!(decode(&json).unwrap().payload(), None, "{payload}");
    }
    let m = decode(r#"{"message":{"id":"x","type":"t","created":1}}"#).unwrap();
    assert_eq!(m.payload(), None);
    assert_eq!(m.execute_at(), None);
    assert_eq!(m.retries(), 0);
}

#[test]
fn execute_at_and_retries_accept_numeric_strings() {
    let m = decode(
        r#"{"message":{"id":"x","type":"t","created":"1700000000.5","execute_at":" 1700000100.25","retries":"4"}}"#,
    )
    .unwrap();
    assert_eq!(m.created(), 1700000000.5);
    assert_eq!(m.execute_at(), Some(1700000100.25));
    assert_eq!(m.retries(), 4);

    let m = decode(
        r#"{"message":{"id":"x","type":"t","created":1,"execute_at":"tomorrow","retries":"many"}}"#,
    )
    .unwrap();
    assert_eq!(m.execute_at(), None);
    assert_eq!(m.retries(), 0);

    let m = decode(r#"{"message":{"id":"x","type":"t","created":1,"execute_at":{},"retries":-3}}"#)
        .unwrap();
    assert_eq!(m.execute_at(), None);
    assert_eq!(m.retries(), 0);

    let m = decode(r#"{"message":{"id":"x","type":"t","created":1,"retries":2.9}}"#).unwrap();
    assert_eq!(m.retries(), 2);
}

#[test]
fn an_empty_id_becomes_a_fresh_uuid_and_zero_stays() {
    let a = decode(r#"{"message":{"id":"","type":"t","created":1}}"#).unwrap();
    let b = decode(r#"{"message":{"id":"","type":"t","created":1}}"#).unwrap();
    assert_eq!(a.id().len(), 36);
    assert!(uuid_v4_like(a.id()), "{}", a.id());
    assert_ne!(a.id(), b.id());
    let zero = decode(r#"{"message":{"id":"0","type":"t","created":1}}"#).unwrap();
    assert_eq!(zero.id(), "0");
}

fn uuid_v4_like(id: &str) -> bool {
    let parts: Vec<_> = id.split('-').collect();
    parts.iter().map(|p| p.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && parts[2].starts_with('4')
        && id
            .chars()
            .all(|c| c == '-' || c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

#[test]
fn invalid_json_top_level_and_trailing_garbage_are_errors() {
    let cases: [(&str, &str); 6] = [
        ("", "invalid JSON"),
        ("{\"message\":", "invalid JSON"),
        ("not json at all", "invalid JSON"),
        ("[1,2,3]", "the top level is not a JSON object"),
        ("\"message\"", "the top level is not a JSON object"),
        (
            r#"{"message":{"id":"x","type":"t","created":1}} trailing"#,
            "invalid JSON",
        ),
    ];
    for (input, reason) in cases {
        let err = decode(input).unwrap_err();
        assert!(
            err.reason().starts_with(reason),
            "{input:?}: {}",
            err.reason()
        );
        assert_eq!(err.len(), input.len());
    }
    let err = decode(r#"{"message":{"id":"x","type":"t","created":1}} trailing"#).unwrap_err();
    assert!(
        err.reason().contains("trailing characters"),
        "{}",
        err.reason()
    );
}

#[test]
fn a_decode_error_names_reason_length_and_hash_but_never_the_input() {
    let secret = "hunter2-credit-card-4111111111111111";
    let inputs = [
        format!(r#"{{"message":{{"id":"x","type":"t","payload":{{"card":"{secret}"}}}}}}"#),
        format!(r#"{{"message":{{"id":"x","type":"t","created":"{secret}"}}}}"#),
        format!(r#"{{"message":{{"id":"x","type":"t","created":1}}}} "{secret}""#),
        format!(r#"{{"message":{{"id":{{"{secret}":1}},"type":"t","created":1}}}}"#),
        format!(r#"{{"message": "{secret}"#),
        format!(
            r#"{{"message":{{"id":"x","type":"t","created":1,"payload":{{"{secret}": tru}}}}}}"#
        ),
    ];
    for input in inputs {
        let err = decode(&input).unwrap_err();
        let text = err.to_string();
        assert!(!text.contains(secret), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains(&format!("length {}", input.len())), "{text}");
        assert_eq!(err.sha256_prefix().len(), 8);
        assert!(text.contains(err.sha256_prefix()), "{text}");
        let debug = format!("{:?}", hermes_core::Error::from(err));
        assert!(!debug.contains(secret), "{debug}");
    }
    // The prefix identifies the input: sha256("") starts with e3b0c442.
    assert_eq!(decode("").unwrap_err().sha256_prefix(), "e3b0c442");
}

fn arb_json(depth: u32) -> BoxedStrategy<serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        any::<String>().prop_map(serde_json::Value::String),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        leaf,
        prop::collection::vec(arb_json(depth - 1), 0..4).prop_map(serde_json::Value::Array),
        prop::collection::vec((any::<String>(), arb_json(depth - 1)), 0..4)
            .prop_map(|kv| serde_json::Value::Object(kv.into_iter().collect())),
    ]
    .boxed()
}

fn arb_payload() -> impl Strategy<Value = Option<serde_json::Value>> {
    prop_oneof![
        Just(None),
        prop::collection::vec(arb_json(2), 0..4).prop_map(|v| Some(serde_json::Value::Array(v))),
        prop::collection::vec((any::<String>(), arb_json(2)), 0..4)
            .prop_map(|kv| Some(serde_json::Value::Object(kv.into_iter().collect()))),
    ]
}

fn same_json(a: Option<&serde_json::Value>, b: Option<&serde_json::Value>) -> bool {
    use serde_json::Value;
    fn eq(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(x, y)| eq(x, y))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .zip(y)
                        .all(|((kx, x), (ky, y))| kx == ky && eq(x, y))
            }
            _ => a == b,
        }
    }
    match (a, b) {
        (Some(a), Some(b)) => eq(a, b),
        (a, b) => a.is_none() && b.is_none(),
    }
}

proptest! {
    #[test]
    fn any_message_round_trips(
        id in "\\PC{1,20}",
        message_type in any::<String>(),
        payload in arb_payload(),
        // Any finite float is written in PHP's format; due times end with the year 9999.
        created in any::<f64>().prop_filter("finite", |f| f.is_finite()),
        execute_at in proptest::option::of(
            any::<f64>().prop_filter("a due time", |f| f.is_finite() && *f <= hermes_core::driver::LATEST_DUE),
        ),
        retries in any::<u32>(),
        traceparent in proptest::option::of(
            "00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}"
                .prop_filter("non-zero ids", |t| !t[3..35].bytes().all(|b| b == b'0') && !t[36..52].bytes().all(|b| b == b'0')),
        ),
    ) {
        let mut builder = Message::builder(message_type).id(id).created(created).retries(retries);
        if let Some(traceparent) = &traceparent {
            builder = builder.traceparent(traceparent);
        }
        if let Some(payload) = &payload {
            builder = builder.payload(payload);
        }
        if let Some(at) = execute_at {
            builder = builder.execute_at(at);
        }
        let message = builder.build().unwrap();
        let bytes = JsonSerializer.serialize(&message).unwrap();
        prop_assert!(bytes.is_ascii(), "non-ASCII is escaped");
        let back = JsonSerializer.deserialize(&bytes).unwrap();
        prop_assert_eq!(back.id(), message.id());
        prop_assert_eq!(back.message_type(), message.message_type());
        prop_assert_eq!(back.created(), message.created());
        prop_assert_eq!(back.execute_at(), message.execute_at());
        prop_assert_eq!(back.retries(), message.retries());
        prop_assert_eq!(back.traceparent(), traceparent.as_deref());
        // A whole-number float is written without a fraction, as PHP does, so it reads back as
        // an integer of the same value.
        prop_assert!(same_json(back.payload(), message.payload()), "{:?} != {:?}", back.payload(), message.payload());
        prop_assert_eq!(JsonSerializer.serialize(&back).unwrap(), bytes);
    }
}
