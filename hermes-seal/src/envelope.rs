//! What a sealed or compressed payload looks like in the message: an object with the one key
//! `$hermes`, holding the form's version, the key id (sealed only), whether the bytes are
//! zstd-compressed, and the bytes in base64:
//!
//! ```json
//! {"$hermes":{"v":1,"key":"2026-12","zstd":false,"data":"…"}}
//! ```
//!
//! A PHP Hermes decoder reads it as any object payload.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

/// The payload key that marks the form.
pub(crate) const MARK: &str = "$hermes";

/// The version of the form written.
const VERSION: u64 = 1;

/// A payload in stored form.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Envelope {
    /// The id of the key that sealed it; none when it is only compressed.
    pub(crate) key: Option<String>,
    pub(crate) zstd: bool,
    pub(crate) data: Vec<u8>,
}

impl Envelope {
    /// The payload object holding this envelope.
    pub(crate) fn to_payload(&self) -> Value {
        let mut inner = Map::new();
        inner.insert("v".into(), VERSION.into());
        if let Some(key) = &self.key {
            inner.insert("key".into(), key.clone().into());
        }
        inner.insert("zstd".into(), self.zstd.into());
        inner.insert("data".into(), STANDARD.encode(&self.data).into());
        let mut outer = Map::new();
        outer.insert(MARK.into(), Value::Object(inner));
        Value::Object(outer)
    }

    /// The envelope a payload holds: `None` for a payload in plain form (no `$hermes` key
    /// alone), an error naming what is wrong with one that has the key but not the form.
    pub(crate) fn read(payload: Option<&Value>) -> Option<Result<Envelope, String>> {
        let outer = payload?.as_object()?;
        if outer.len() != 1 {
            return None;
        }
        let inner = outer.get(MARK)?;
        Some(Envelope::parse(inner))
    }

    fn parse(inner: &Value) -> Result<Envelope, String> {
        let inner = inner
            .as_object()
            .ok_or("the $hermes payload is not an object")?;
        match inner.get("v").and_then(Value::as_u64) {
            Some(VERSION) => {}
            Some(v) => {
                return Err(format!(
                    "the $hermes payload has version {v}, not {VERSION}"
                ));
            }
            None => return Err("the $hermes payload has no version".into()),
        }
        let key = match inner.get("key") {
            None | Some(Value::Null) => None,
            Some(Value::String(key)) => Some(key.clone()),
            Some(_) => return Err("the key id of the $hermes payload is not a string".into()),
        };
        let zstd = match inner.get("zstd") {
            None => false,
            Some(Value::Bool(zstd)) => *zstd,
            Some(_) => return Err("zstd of the $hermes payload is not true or false".into()),
        };
        let data = inner
            .get("data")
            .and_then(Value::as_str)
            .ok_or("the $hermes payload has no data")?;
        let data = STANDARD
            .decode(data)
            .map_err(|_| "the data of the $hermes payload is not base64")?;
        Ok(Envelope { key, zstd, data })
    }
}

/// The associated data a seal is bound to: the message's id and type, and how the payload is
/// stored, so a sealed payload copied into another message, or relabelled, does not open.
pub(crate) fn bound_to(id: &str, message_type: &str, key: &str, zstd: bool) -> Vec<u8> {
    let mut aad = Vec::with_capacity(32 + id.len() + message_type.len() + key.len());
    for part in [
        "hermes-seal/1",
        id,
        message_type,
        key,
        if zstd { "zstd" } else { "plain" },
    ] {
        aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
        aad.extend_from_slice(part.as_bytes());
    }
    aad
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_reads_back_and_plain_payloads_are_not_envelopes() {
        let envelope = Envelope {
            key: Some("k1".into()),
            zstd: true,
            data: vec![0, 1, 2, 255],
        };
        let payload = envelope.to_payload();
        assert_eq!(Envelope::read(Some(&payload)), Some(Ok(envelope)));
        for plain in [
            serde_json::json!({"to": "a@b.c"}),
            serde_json::json!({"$hermes": 1, "other": 2}),
            serde_json::json!([1, 2]),
        ] {
            assert_eq!(Envelope::read(Some(&plain)), None, "{plain}");
        }
        assert_eq!(Envelope::read(None), None);
        let broken = serde_json::json!({"$hermes": {"v": 1, "data": "%%%"}});
        assert!(Envelope::read(Some(&broken)).unwrap().is_err());
    }

    #[test]
    fn the_bound_data_tells_apart_what_plain_concatenation_would_not() {
        assert_ne!(
            bound_to("ab", "c", "k", false),
            bound_to("a", "bc", "k", false)
        );
        assert_ne!(
            bound_to("a", "b", "k", false),
            bound_to("a", "b", "k", true)
        );
    }
}
