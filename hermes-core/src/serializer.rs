//! Turning messages into bytes and back: the [`Serializer`] trait and Hermes' JSON format.

use std::fmt::Debug;

use serde_json::{Map, Value};

use crate::{DecodeError, Error, Message};

/// Encodes messages for a driver and decodes what the driver receives.
///
/// Every driver takes one, [`JsonSerializer`] by default. Emitters and workers that share a
/// queue must use the same format.
pub trait Serializer: Debug + Send + Sync + 'static {
    /// The bytes stored on the queue for `message`.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] when the message cannot be represented (a time that is not
    /// finite).
    fn serialize(&self, message: &Message) -> Result<Vec<u8>, Error>;

    /// The message stored in `bytes`.
    ///
    /// # Errors
    /// A [`DecodeError`] that says why, without quoting `bytes`.
    fn deserialize(&self, bytes: &[u8]) -> Result<Message, DecodeError>;
}

impl Serializer for std::sync::Arc<dyn Serializer> {
    fn serialize(&self, message: &Message) -> Result<Vec<u8>, Error> {
        (**self).serialize(message)
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Message, DecodeError> {
        (**self).deserialize(bytes)
    }
}

/// Hermes' JSON format, byte for byte as PHP's `json_encode` writes it:
///
/// ```json
/// {"message":{"id":"…","type":"send-email","created":1710000000.123,"payload":{"to":"a@b.c"},"execute_at":null,"retries":0}}
/// ```
///
/// Keys come in that order; payload keys keep their order; `/` is written `\/` and non-ASCII
/// characters as `\uXXXX`; floats use the shortest form that reads back the same, without a
/// fraction when they are whole (`1700000000`).
///
/// Decoding follows Hermes' rules: `type`, `id` and `created` are required (`null` counts as
/// missing); an empty id becomes a fresh UUID and a non-string id is an error; a payload that is
/// not an object or array becomes `None`; `execute_at` and `retries` accept numbers and numeric
/// strings (else none and 0). Other keys are ignored, as PHP ignores them.
///
/// A message with a [`traceparent`](Message::traceparent) has it as one more key after
/// `retries` (`,"traceparent":"00-…-…-01"`); PHP's decoder ignores it. Without one the bytes
/// are exactly PHP's. On decoding, a `traceparent` that is not a string holding a valid W3C
/// `traceparent` of version 00 is ignored.
///
/// A message of a [unique](crate::Unique) emit whose key is given up when it is done has the
/// key as one more key after that (`,"unique_key":"…"`), so the worker can give it up; PHP's
/// decoder ignores it too. On decoding, a `unique_key` that is not a string
/// [`Unique::check`](crate::Unique::check) would accept (not empty, not too long) is ignored.
///
/// A message with a [limit key](Message::limit_key) has it next (`,"limit_key":"…"`), for the
/// worker's per-key limits; PHP's decoder ignores it. On decoding, one that is not a string of
/// 1 to [`MAX_LIMIT_KEY_LEN`](crate::flow::MAX_LIMIT_KEY_LEN) bytes is ignored.
///
/// A member of a batch or a workflow names it after that (`,"group":"…"`), so the worker can
/// settle it there; PHP's decoder ignores it. On decoding, one that is not a valid group id
/// ([`tracking::check_group_id`](crate::tracking::check_group_id)) is ignored. A message
/// emitted [tracked](Message::is_tracked) has `,"tracked":true` last.
///
/// ```
/// use hermes_core::{JsonSerializer, Message, Serializer};
///
/// let bytes = br#"{"message":{"id":"id-2","type":"t","created":1700000000,"payload":[],"execute_at":1700000100.5,"retries":3}}"#;
/// let message = JsonSerializer.deserialize(bytes)?;
/// assert_eq!(message.retries(), 3);
/// assert_eq!(JsonSerializer.serialize(&message)?, bytes);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonSerializer;

impl Serializer for JsonSerializer {
    fn serialize(&self, message: &Message) -> Result<Vec<u8>, Error> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(b"{\"message\":{\"id\":");
        write_string(&mut out, message.id());
        out.extend_from_slice(b",\"type\":");
        write_string(&mut out, message.message_type());
        out.extend_from_slice(b",\"created\":");
        write_float(&mut out, message.created(), "created")?;
        out.extend_from_slice(b",\"payload\":");
        match message.payload() {
            Some(payload) => write_value(&mut out, payload)?,
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"execute_at\":");
        match message.execute_at() {
            Some(at) => write_float(&mut out, at, "execute_at")?,
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"retries\":");
        write_integer(&mut out, message.retries());
        // Only when present, so a message without one is byte for byte what PHP writes.
        if let Some(traceparent) = message.traceparent() {
            out.extend_from_slice(b",\"traceparent\":");
            write_string(&mut out, traceparent);
        }
        if let Some(key) = message.unique_key() {
            out.extend_from_slice(b",\"unique_key\":");
            write_string(&mut out, key);
        }
        if let Some(key) = message.limit_key() {
            out.extend_from_slice(b",\"limit_key\":");
            write_string(&mut out, key);
        }
        if let Some(group) = message.group() {
            out.extend_from_slice(b",\"group\":");
            write_string(&mut out, group);
        }
        if message.is_tracked() {
            out.extend_from_slice(b",\"tracked\":true");
        }
        out.extend_from_slice(b"}}");
        Ok(out)
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Message, DecodeError> {
        let fail = |reason: &str| DecodeError::new(reason, bytes);
        let value: Value = serde_json::from_slice(bytes)
            .map_err(|e| fail(&format!("invalid JSON: {}", json_error_reason(&e))))?;
        let Value::Object(mut top) = value else {
            return Err(fail("the top level is not a JSON object"));
        };
        let Some(Value::Object(mut fields)) = top.remove("message") else {
            return Err(fail("\"message\" is missing or not an object"));
        };
        let message_type = match take(&mut fields, "type") {
            None => return Err(fail("message.type is missing")),
            Some(Value::String(s)) => s,
            Some(_) => return Err(fail("message.type is not a string")),
        };
        let id = match take(&mut fields, "id") {
            None => return Err(fail("message.id is missing")),
            Some(Value::String(s)) => s,
            Some(_) => return Err(fail("message.id is not a string")),
        };
        let created = match take(&mut fields, "created") {
            None => return Err(fail("message.created is missing")),
            Some(v) => number(&v).ok_or_else(|| fail("message.created is not a number"))?,
        };
        let payload = take(&mut fields, "payload");
        let execute_at = take(&mut fields, "execute_at").and_then(|v| number(&v));
        let retries = take(&mut fields, "retries")
            .and_then(|v| number(&v))
            .map_or(0, |r| r.clamp(0.0, f64::from(u32::MAX)) as u32);
        // A foreign producer's bad value is dropped, never a reason to lose the message.
        let traceparent = match take(&mut fields, "traceparent") {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        let unique_key = match take(&mut fields, "unique_key") {
            Some(Value::String(s))
                if !s.is_empty() && s.len() <= crate::message::MAX_UNIQUE_KEY_LEN =>
            {
                Some(s)
            }
            _ => None,
        };
        let limit_key = match take(&mut fields, "limit_key") {
            Some(Value::String(s)) if crate::flow::check_limit_key(&s).is_ok() => Some(s),
            _ => None,
        };
        let tracked = take(&mut fields, "tracked") == Some(Value::Bool(true));
        let group = match take(&mut fields, "group") {
            Some(Value::String(s)) if crate::tracking::check_group_id(&s).is_ok() => Some(s),
            _ => None,
        };
        Ok(Message::from_parts(
            id,
            message_type,
            payload,
            created,
            execute_at,
            retries,
            traceparent,
        )
        .with_unique_key(unique_key)
        .with_limit_key(limit_key)
        .with_group(group)
        .with_tracked(tracked))
    }
}

/// Removes `key`, treating JSON `null` as missing.
fn take(fields: &mut Map<String, Value>, key: &str) -> Option<Value> {
    fields.remove(key).filter(|v| !v.is_null())
}

/// A finite number, or a string PHP would call numeric.
fn number(value: &Value) -> Option<f64> {
    let n = match value {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => {
            let s = s.trim_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
            let numeric = !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.' | b'e' | b'E'))
                && s.bytes().any(|b| b.is_ascii_digit());
            if !numeric {
                return None;
            }
            s.parse::<f64>().ok()?
        }
        _ => return None,
    };
    n.is_finite().then_some(n)
}

/// A serde_json error's category and position, which never quote the input.
fn json_error_reason(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let what = match e.classify() {
        Category::Eof => "unexpected end of input",
        Category::Syntax => "syntax error",
        Category::Data => "unexpected data",
        Category::Io => "read error",
    };
    // The syntax messages of serde_json ("trailing characters", "expected value", …) name the
    // problem, not the input; keep the part before " at line".
    let text = e.to_string();
    let detail = text.split(" at line").next().unwrap_or_default();
    if detail.contains('"') || detail.contains('`') {
        format!("{what} at line {} column {}", e.line(), e.column())
    } else {
        format!("{detail} at line {} column {}", e.line(), e.column())
    }
}

pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value) -> Result<(), Error> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                write_integer(out, i);
            } else if let Some(u) = n.as_u64() {
                write_integer(out, u);
            } else {
                write_float(out, n.as_f64().unwrap_or(f64::NAN), "payload")?;
            }
        }
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(out, key);
                out.push(b':');
                write_value(out, item)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// An integer in decimal.
fn write_integer(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// The bytes a JSON string holds as they are: printable ASCII but `"`, `\` and `/`.
const PLAIN: [bool; 256] = {
    let mut plain = [false; 256];
    let mut b = 0x20;
    while b < 0x80 {
        plain[b] = !matches!(b as u8, b'"' | b'\\' | b'/');
        b += 1;
    }
    plain
};

/// A JSON string as PHP's `json_encode` writes it with default flags: `/` as `\/`, control
/// characters and everything outside ASCII as `\uXXXX` (UTF-16, lower-case hex).
fn write_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let unit_escape = |out: &mut Vec<u8>, unit: u16| {
        out.extend_from_slice(b"\\u");
        for shift in [12, 8, 4, 0] {
            out.push(HEX[usize::from((unit >> shift) & 0xf)]);
        }
    };
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // Runs of plain ASCII are copied whole; only the bytes that need escaping stop the run.
    let (mut start, mut i) = (0, 0);
    while let Some(plain) = bytes[i..].iter().position(|&b| !PLAIN[usize::from(b)]) {
        i += plain;
        let b = bytes[i];
        let short: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'/' => Some(b"\\/"),
            0x08 => Some(b"\\b"),
            0x0c => Some(b"\\f"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            _ => None,
        };
        out.extend_from_slice(&bytes[start..i]);
        if let Some(escape) = short {
            out.extend_from_slice(escape);
            i += 1;
        } else if b < 0x20 {
            unit_escape(out, u16::from(b));
            i += 1;
        } else {
            let c = s[i..].chars().next().expect("a char starts here");
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                unit_escape(out, *unit);
            }
            i += c.len_utf8();
        }
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// A float as PHP writes it with `serialize_precision = -1`: the shortest digits that read back
/// the same, fixed notation from 1e-4 up to 1e17 (no fraction when whole), else `d.ddde+N`.
fn write_float(out: &mut Vec<u8>, value: f64, field: &str) -> Result<(), Error> {
    if !value.is_finite() {
        return Err(Error::InvalidMessage(format!(
            "{field} holds a number that is not finite, which JSON cannot represent"
        )));
    }
    // ryu gives the shortest round-trip digits, as "-1.2345e-7", "1.0", "0.0001" or "1e16".
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(value).as_bytes();
    if (1.0..1e15).contains(&value.abs()) {
        // Times and most other numbers: ryu writes them in fixed notation as PHP does, but
        // for the ".0" of a whole number.
        out.extend_from_slice(text.strip_suffix(b".0").unwrap_or(text));
        return Ok(());
    }
    write_digits(out, text);
    Ok(())
}

/// Writes ryu's `text` of a number as PHP does (see [`write_float`]).
fn write_digits(out: &mut Vec<u8>, text: &[u8]) {
    let (negative, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let (mantissa, exponent) = match text.iter().position(|&b| b == b'e') {
        Some(e) => (&text[..e], &text[e + 1..]),
        None => (text, &b"0"[..]),
    };
    let exponent: i32 = std::str::from_utf8(exponent)
        .ok()
        .and_then(|e| e.parse().ok())
        .unwrap_or(0);
    let point = mantissa
        .iter()
        .position(|&b| b == b'.')
        .unwrap_or(mantissa.len());
    let mut all = [0u8; 32];
    let mut count = 0;
    for &b in mantissa
        .iter()
        .filter(|b| b.is_ascii_digit())
        .take(all.len())
    {
        all[count] = b;
        count += 1;
    }
    let leading = all[..count].iter().take_while(|&&b| b == b'0').count();
    let trailing = all[leading..count]
        .iter()
        .rev()
        .take_while(|&&b| b == b'0')
        .count();
    let digits = &all[leading..count - trailing];
    // PHP's decpt: the value is 0.d1d2… × 10^decpt.
    let (digits, decpt) = if digits.is_empty() {
        (&b"0"[..], 1)
    } else {
        (digits, point as i32 - leading as i32 + exponent)
    };
    if negative {
        out.push(b'-');
    }
    if !(-3..=17).contains(&decpt) {
        out.push(digits[0]);
        out.push(b'.');
        if digits.len() == 1 {
            out.push(b'0');
        } else {
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if decpt > 0 { b'+' } else { b'-' });
        write_integer(out, (decpt - 1).unsigned_abs());
    } else if decpt <= 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', decpt.unsigned_abs() as usize));
        out.extend_from_slice(digits);
    } else {
        let decpt = decpt as usize;
        for i in 0..decpt {
            out.push(digits.get(i).copied().unwrap_or(b'0'));
        }
        if digits.len() > decpt {
            out.push(b'.');
            out.extend_from_slice(&digits[decpt..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float(v: f64) -> String {
        let mut out = Vec::new();
        write_float(&mut out, v, "x").unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn floats_are_written_as_php_writes_them() {
        assert_eq!(float(1700000000.0), "1700000000");
        assert_eq!(float(1637617498.172724), "1637617498.172724");
        assert_eq!(float(1.5), "1.5");
        assert_eq!(float(0.5), "0.5");
        assert_eq!(float(0.05), "0.05");
        assert_eq!(float(0.0001), "0.0001");
        assert_eq!(float(0.00001), "1.0e-5");
        assert_eq!(float(1.25e-7), "1.25e-7");
        assert_eq!(float(0.0), "0");
        assert_eq!(float(-0.0), "-0");
        assert_eq!(float(-2.5), "-2.5");
        assert_eq!(float(1e16), "10000000000000000");
        assert_eq!(float(1e17), "1.0e+17");
        assert_eq!(float(1e18), "1.0e+18");
        assert_eq!(float(1.5e300), "1.5e+300");
        assert_eq!(float(0.1 + 0.2), "0.30000000000000004");
        assert!(write_float(&mut Vec::new(), f64::NAN, "x").is_err());
    }

    #[test]
    fn floats_read_back_the_same_in_the_fewest_digits() {
        // A tie between two shortest forms goes to the even digit, as in PHP (the standard
        // library's `{:e}` writes ...813 here).
        // 1655314117 + 61/256 is exactly 1655314117.23828125.
        assert_eq!(float(1655314117.0 + 61.0 / 256.0), "1655314117.2382812");
        let mut values = vec![1e-300, 5e-324, f64::MAX, f64::MIN_POSITIVE, 123.0];
        for _ in 0..100_000 {
            values.push(f64::from_bits(rand::random::<u64>()));
            values.push((rand::random::<f64>() * 2e15).round() / 1e6);
        }
        for value in values.into_iter().filter(|v| v.is_finite()) {
            let text = float(value);
            assert_eq!(text.parse::<f64>().unwrap(), value, "{text}");
            let digits = |t: &str| {
                let mantissa = t.split('e').next().unwrap_or(t);
                let digits = mantissa.replace(['-', '.'], "");
                digits.trim_matches('0').len()
            };
            let shortest = format!("{value:e}");
            assert!(
                digits(&text) <= digits(&shortest).max(1),
                "{text} {shortest}"
            );
        }
    }

    #[test]
    fn the_short_way_for_common_numbers_writes_what_the_long_way_does() {
        let mut values = vec![
            1.0,
            1e15 - 0.5,
            999_999_999_999_999.9,
            123.0,
            1_700_000_000.0,
        ];
        for _ in 0..100_000 {
            values.push((rand::random::<f64>() * 2e15).round() / 1e6);
            values.push(rand::random::<f64>() * 1e15);
            values.push(1.0 + rand::random::<f64>() * 1000.0);
        }
        for value in values.into_iter().filter(|v| (1.0..1e15).contains(v)) {
            for value in [value, -value] {
                let mut long = Vec::new();
                write_digits(
                    &mut long,
                    ryu::Buffer::new().format_finite(value).as_bytes(),
                );
                assert_eq!(float(value).as_bytes(), long, "{value:e}");
            }
        }
    }

    #[test]
    fn integers_are_written_in_decimal() {
        for (n, text) in [(0_i64, "0"), (-7, "-7"), (i64::MIN, "-9223372036854775808")] {
            let mut out = Vec::new();
            write_integer(&mut out, n);
            assert_eq!(out, text.as_bytes());
        }
        let mut out = Vec::new();
        write_integer(&mut out, u64::MAX);
        assert_eq!(out, b"18446744073709551615");
    }

    #[test]
    fn strings_are_escaped_as_php_escapes_them() {
        let mut out = Vec::new();
        write_string(&mut out, "a/b\"\\\n\u{1}é😀<>&'\u{7f}");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#""a\/b\"\\\n\u0001\u00e9\ud83d\ude00<>&'"#.to_owned() + "\u{7f}\""
        );
    }
}
