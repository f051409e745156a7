//! The messages of a run: each carries a sequence number, some random data and a checksum of
//! both, so a handler can tell a message that arrived intact from one that did not.

use hermes_core::Message;
use rand::Rng;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The message type of a run's messages.
pub const SOAK: &str = "hermes-soak.check";

fn checksum(seq: u64, data: &str) -> String {
    let digest = Sha256::digest(format!("{seq}:{data}"));
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The payload of message `seq`: `{"seq": …, "data": …, "sum": …}`.
pub fn payload(seq: u64, rng: &mut impl Rng) -> Value {
    let data: String = (0..32)
        .map(|_| char::from(b"0123456789abcdef"[rng.random_range(0..16)]))
        .collect();
    let sum = checksum(seq, &data);
    json!({ "seq": seq, "data": data, "sum": sum })
}

/// The sequence number of `message`, when its payload is intact; `Err` with the number, if
/// one could be read, otherwise.
pub fn verify(message: &Message) -> Result<u64, Option<u64>> {
    let payload = message.payload().ok_or(None)?;
    let seq = payload.get("seq").and_then(Value::as_u64).ok_or(None)?;
    let data = payload.get("data").and_then(Value::as_str);
    let sum = payload.get("sum").and_then(Value::as_str);
    match (data, sum) {
        (Some(data), Some(sum)) if message.message_type() == SOAK && checksum(seq, data) == sum => {
            Ok(seq)
        }
        _ => Err(Some(seq)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(payload: &Value) -> Message {
        Message::builder(SOAK).payload(payload).build().unwrap()
    }

    #[test]
    fn an_intact_payload_verifies_and_a_changed_one_does_not() {
        let mut rng = rand::rng();
        let good = payload(7, &mut rng);
        assert_eq!(verify(&message(&good)), Ok(7));

        let mut changed = good.clone();
        changed["seq"] = json!(8);
        assert_eq!(verify(&message(&changed)), Err(Some(8)));
        let mut changed = good.clone();
        changed["data"] = json!("0");
        assert_eq!(verify(&message(&changed)), Err(Some(7)));
        assert_eq!(verify(&message(&json!({"data": "x"}))), Err(None));
        let other = Message::builder("other").payload(&good).build().unwrap();
        assert_eq!(verify(&other), Err(Some(7)));
    }
}
