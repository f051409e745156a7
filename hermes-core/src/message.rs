//! The message: what crosses from the emitting process to the worker.

use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::Error;
use crate::flow::check_limit_key;
use crate::time::{to_unix, unix_now};

/// The latest due time a message may have: the last second of the year 9999 (UTC), in Unix
/// seconds. Later times cannot be ordered by every backend (file names have a fixed width,
/// dates end there), so [`Message::check`] refuses them.
pub const LATEST_DUE: f64 = 253_402_300_799.0;

/// The longest uniqueness key a message can hold (see [`Unique`](crate::Unique)), in bytes.
pub const MAX_UNIQUE_KEY_LEN: usize = 512;

/// One job: a type, an optional JSON payload, and the bookkeeping Hermes stores with it.
///
/// The fields and their meaning are those of Hermes' `Message`, so PHP and Rust processes can
/// share a queue. The priority is not part of the message: it is an argument of
/// [`Emitter::emit`](crate::Emitter::emit) and [`Driver::send`](crate::Driver::send) only.
///
/// ```
/// use std::time::Duration;
/// use hermes_core::Message;
///
/// let message = Message::builder("send-email")
///     .payload(&serde_json::json!({"to": "a@b.c"}))
///     .delay(Duration::from_secs(60))
///     .build()?;
/// assert_eq!(message.message_type(), "send-email");
/// assert_eq!(message.retries(), 0);
/// assert!(message.execute_at().unwrap() > message.created());
/// # Ok::<(), hermes_core::Error>(())
/// ```
///
/// A message may also carry a W3C [`traceparent`](Message::traceparent), so the worker's span
/// continues the emitter's trace. It travels as an extra key Hermes' PHP decoder ignores.
///
/// Its `Debug` output leaves the payload out (payloads carry personal data): it shows only
/// whether there is one and its size.
#[derive(Clone, PartialEq)]
pub struct Message {
    id: String,
    message_type: String,
    payload: Option<Value>,
    created: f64,
    execute_at: Option<f64>,
    retries: u32,
    traceparent: Option<String>,
    unique_key: Option<String>,
    limit_key: Option<String>,
    group: Option<String>,
    tracked: bool,
}

impl Message {
    /// A message of `message_type` without payload, with a fresh id, created now.
    pub fn new(message_type: impl Into<String>) -> Self {
        Message {
            id: new_id(),
            message_type: message_type.into(),
            payload: None,
            created: unix_now(),
            execute_at: None,
            retries: 0,
            traceparent: None,
            unique_key: None,
            limit_key: None,
            group: None,
            tracked: false,
        }
    }

    /// A builder for a message of `message_type`; see [`MessageBuilder`].
    pub fn builder(message_type: impl Into<String>) -> MessageBuilder {
        MessageBuilder {
            message: Message::new(message_type),
            error: None,
        }
    }

    /// The message id: a UUID v4 unless the sender chose one.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The message type, which selects the handlers that run it.
    pub fn message_type(&self) -> &str {
        &self.message_type
    }

    /// The payload: a JSON object or array, or `None`.
    pub fn payload(&self) -> Option<&Value> {
        self.payload.as_ref()
    }

    /// The payload as a `T`, through serde.
    ///
    /// A missing payload is read as JSON `null`, so `Option<T>` and `()` accept it.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] when the payload does not have the shape of `T`. The error names
    /// the mismatch (a missing field, a wrong type) but does not quote payload strings.
    pub fn payload_as<T: DeserializeOwned>(&self) -> Result<T, Error> {
        let result = match &self.payload {
            Some(value) => from_value(value),
            None => from_value(&Value::Null),
        };
        result.map_err(|reason| {
            Error::InvalidMessage(format!(
                "payload is not a {}: {reason}",
                std::any::type_name::<T>()
            ))
        })
    }

    /// When the message was created, as Unix seconds with microseconds.
    pub fn created(&self) -> f64 {
        self.created
    }

    /// When the message is due, as Unix seconds, or `None` for "now".
    pub fn execute_at(&self) -> Option<f64> {
        self.execute_at
    }

    /// How many times this message has been retried after a failed handler.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// The W3C trace context of the span the message was emitted in: a `traceparent` header
    /// value, `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`, or `None`.
    ///
    /// With the `opentelemetry` feature an [`Emitter`](crate::Emitter) told to propagate traces
    /// sets it, and the worker's `hermes.handle` span continues that trace. A decoded message
    /// has one only when the stored value is a valid `traceparent` of version 00.
    pub fn traceparent(&self) -> Option<&str> {
        self.traceparent.as_deref()
    }

    /// Whether the message is due at Unix time `now` (it has no `execute_at`, or it has passed).
    pub fn is_due_at(&self, now: f64) -> bool {
        self.execute_at.is_none_or(|at| at <= now)
    }

    /// When the message is due: `execute_at`, or `created` when it has none.
    pub fn due(&self) -> f64 {
        self.execute_at.unwrap_or(self.created)
    }

    /// Checks what every driver requires of a message it sends: `created` and `execute_at` are
    /// finite, and `execute_at` is not after [`LATEST_DUE`]. A decoded message may break these
    /// rules (a foreign producer wrote it); a built one does not.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] saying which rule is broken.
    pub fn check(&self) -> Result<(), Error> {
        if !self.created.is_finite() {
            return Err(Error::InvalidMessage(
                "created must be a finite number".into(),
            ));
        }
        match self.execute_at {
            Some(at) if !at.is_finite() => Err(Error::InvalidMessage(
                "execute_at must be a finite number".into(),
            )),
            Some(at) if at > LATEST_DUE => Err(Error::InvalidMessage(format!(
                "execute_at {at:e} is after the year 9999 (the latest due time is {LATEST_DUE})"
            ))),
            _ => Ok(()),
        }
    }

    /// The same message with `payload` in place of its own: for a
    /// [`Serializer`](crate::Serializer) that stores payloads in another form (sealed,
    /// compressed) and gives them back as they were.
    pub fn with_payload(&self, payload: Option<Value>) -> Message {
        // Field by field: the payload replaced is not copied.
        Message {
            id: self.id.clone(),
            message_type: self.message_type.clone(),
            payload,
            created: self.created,
            execute_at: self.execute_at,
            retries: self.retries,
            traceparent: self.traceparent.clone(),
            unique_key: self.unique_key.clone(),
            limit_key: self.limit_key.clone(),
            group: self.group.clone(),
            tracked: self.tracked,
        }
    }

    /// The copy a retry sends: the same id, type, payload, created time and traceparent,
    /// `retries + 1`, due at `execute_at`.
    pub fn retry_copy(&self, execute_at: f64) -> Message {
        Message {
            retries: self.retries.saturating_add(1),
            execute_at: Some(execute_at),
            ..self.clone()
        }
    }

    /// The copy that runs again after `delay` without using a retry (a
    /// [snooze](crate::flow::Snooze), a job over its limits): the same fields and `retries`,
    /// due `delay` from now.
    pub fn later_copy(&self, delay: Duration) -> Message {
        let at = unix_now() + delay.as_secs_f64();
        Message {
            execute_at: Some((at * 1e6).round() / 1e6),
            ..self.clone()
        }
    }

    /// The copy a replay of a dead letter sends: the same id, type, payload, created time and
    /// traceparent, due now, with its retries reset to 0 unless `keep_retries`. It holds no
    /// [uniqueness key](Message::unique_key): the dead letter gave its key up.
    pub fn replay_copy(&self, keep_retries: bool) -> Message {
        Message {
            retries: if keep_retries { self.retries } else { 0 },
            execute_at: None,
            unique_key: None,
            ..self.clone()
        }
    }

    /// The [uniqueness key](crate::Unique) this message gives up when it is done: set by
    /// [`Emitter::emit_unique`](crate::Emitter::emit_unique) for keys released when done,
    /// `None` otherwise. Retry copies keep it.
    pub fn unique_key(&self) -> Option<&str> {
        self.unique_key.as_deref()
    }

    /// This message holding `key` until it is done.
    pub(crate) fn with_unique_key(self, key: Option<String>) -> Message {
        Message {
            unique_key: key,
            ..self
        }
    }

    /// The key this message's per-key [limits](crate::flow::Limits) count it under (a
    /// tenant, a remote host), set with [`MessageBuilder::limit_key`] or by
    /// [`Job::limit_key`](crate::Job::limit_key); `None` when it has none. Retry copies keep
    /// it.
    pub fn limit_key(&self) -> Option<&str> {
        self.limit_key.as_deref()
    }

    /// This message with the limit key `key`, which the caller has checked.
    pub(crate) fn with_limit_key(self, key: Option<String>) -> Message {
        Message {
            limit_key: key,
            ..self
        }
    }

    /// The batch or workflow this message is a member of: the dispatcher settles it there
    /// when it is done for good (see [`tracking`](crate::tracking)). Retry copies keep it.
    pub fn group(&self) -> Option<&str> {
        self.group.as_deref()
    }

    /// Whether the message was emitted tracked
    /// ([`Emitter::emit_tracked`](crate::Emitter::emit_tracked)): its worker then records
    /// every state it reaches, however quickly it succeeds. Retry copies keep it.
    pub fn is_tracked(&self) -> bool {
        self.tracked
    }

    /// This message, tracked or not.
    pub(crate) fn with_tracked(self, tracked: bool) -> Message {
        Message { tracked, ..self }
    }

    /// This message as a member of `group`.
    pub(crate) fn with_group(self, group: Option<String>) -> Message {
        Message { group, ..self }
    }

    /// This message with the id `id`.
    pub(crate) fn with_id(self, id: String) -> Message {
        Message { id, ..self }
    }

    /// Builds a message from decoded parts, applying Hermes' rules: an empty id becomes a fresh
    /// UUID, a payload that is not an object or array becomes `None`; and an invalid
    /// traceparent is dropped.
    pub(crate) fn from_parts(
        id: String,
        message_type: String,
        payload: Option<Value>,
        created: f64,
        execute_at: Option<f64>,
        retries: u32,
        traceparent: Option<String>,
    ) -> Message {
        Message {
            id: if id.is_empty() { new_id() } else { id },
            message_type,
            payload: payload.filter(is_container),
            created,
            execute_at,
            retries,
            traceparent: traceparent.filter(|t| crate::traceparent::is_valid(t)),
            unique_key: None,
            limit_key: None,
            group: None,
            tracked: false,
        }
    }

    /// This message with `traceparent`, which the caller has checked is valid.
    #[cfg(feature = "opentelemetry")]
    pub(crate) fn with_traceparent(&self, traceparent: String) -> Message {
        Message {
            traceparent: Some(traceparent),
            ..self.clone()
        }
    }
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let payload = self.payload.as_ref().map(|value| match value {
            Value::Object(map) => format!("<object of {} keys>", map.len()),
            Value::Array(items) => format!("<array of {} items>", items.len()),
            _ => "<value>".to_owned(),
        });
        f.debug_struct("Message")
            .field("id", &self.id)
            .field("message_type", &self.message_type)
            .field("payload", &payload)
            .field("created", &self.created)
            .field("execute_at", &self.execute_at)
            .field("retries", &self.retries)
            .field("traceparent", &self.traceparent)
            .field("unique_key", &self.unique_key)
            .field("limit_key", &self.limit_key)
            .field("group", &self.group)
            .field("tracked", &self.tracked)
            .finish()
    }
}

/// Builds a [`Message`] field by field; [`build`](MessageBuilder::build) reports the first
/// invalid value.
#[derive(Debug, Clone)]
#[must_use]
pub struct MessageBuilder {
    message: Message,
    error: Option<String>,
}

impl MessageBuilder {
    /// Sets the id. An empty id means "generate one", as in Hermes.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        let id = id.into();
        self.message.id = if id.is_empty() { new_id() } else { id };
        self
    }

    /// Sets the key the per-key [limits](crate::flow::Limits) of its type count it under: a
    /// tenant, a customer, a remote host. A key that is empty or longer than
    /// [`MAX_LIMIT_KEY_LEN`](crate::flow::MAX_LIMIT_KEY_LEN) bytes makes
    /// [`build`](Self::build) fail.
    pub fn limit_key(mut self, key: impl Into<String>) -> Self {
        let key = key.into();
        if let Err(reason) = check_limit_key(&key) {
            self.fail(reason);
        }
        self.message.limit_key = Some(key);
        self
    }

    /// Sets the payload from anything serde can turn into a JSON object or array.
    /// Anything else (a string, a number, `null`) makes [`build`](Self::build) fail.
    pub fn payload<T: Serialize + ?Sized>(mut self, payload: &T) -> Self {
        match serde_json::to_value(payload) {
            Ok(value) if is_container(&value) => self.message.payload = Some(value),
            Ok(_) => self.fail("the payload must be a JSON object or array"),
            Err(e) => self.fail(format!("the payload cannot be serialized: {e}")),
        }
        self
    }

    /// Sets the creation time as Unix seconds.
    pub fn created(mut self, created: f64) -> Self {
        self.message.created = created;
        self
    }

    /// Sets the creation time.
    pub fn created_at(self, created: SystemTime) -> Self {
        self.created(to_unix(created))
    }

    /// Makes the message due at Unix time `execute_at` (seconds).
    pub fn execute_at(mut self, execute_at: f64) -> Self {
        self.message.execute_at = Some(execute_at);
        self
    }

    /// Makes the message due at `time`.
    pub fn execute_at_time(self, time: SystemTime) -> Self {
        self.execute_at(to_unix(time))
    }

    /// Makes the message due `delay` from now.
    pub fn delay(self, delay: Duration) -> Self {
        let at = unix_now() + delay.as_secs_f64();
        self.execute_at((at * 1e6).round() / 1e6)
    }

    /// Sets the retry count.
    pub fn retries(mut self, retries: u32) -> Self {
        self.message.retries = retries;
        self
    }

    /// Sets the W3C trace context the message carries (see [`Message::traceparent`]): a
    /// `traceparent` header value of version 00, lower-case hex, neither id all zeros. Anything
    /// else makes [`build`](Self::build) fail.
    pub fn traceparent(mut self, traceparent: impl Into<String>) -> Self {
        let traceparent = traceparent.into();
        if crate::traceparent::is_valid(&traceparent) {
            self.message.traceparent = Some(traceparent);
        } else {
            self.fail("the traceparent is not a W3C traceparent of version 00");
        }
        self
    }

    /// The message.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] for a payload that is not a JSON object or array, an invalid
    /// traceparent, or times [`Message::check`] refuses (not finite, due after the year 9999).
    pub fn build(self) -> Result<Message, Error> {
        if let Some(error) = self.error {
            return Err(Error::InvalidMessage(error));
        }
        self.message.check()?;
        Ok(self.message)
    }

    /// Makes [`build`](Self::build) fail with `error`, unless an earlier error is recorded.
    pub(crate) fn fail(&mut self, error: impl Into<String>) {
        self.error.get_or_insert(error.into());
    }
}

fn new_id() -> String {
    let mut id = [0u8; uuid::fmt::Hyphenated::LENGTH];
    uuid::Uuid::new_v4()
        .hyphenated()
        .encode_lower(&mut id)
        .to_owned()
}

fn is_container(value: &Value) -> bool {
    value.is_object() || value.is_array()
}

/// Deserializes `value` as a `T`. The error text names the path of the field that did not fit
/// and what was expected (``to: invalid type: string "…", expected u32``), with every quoted
/// part, which may be payload data, replaced by `"…"`.
pub(crate) fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let reason = redact_quoted(&e.inner().to_string());
        let path = field_path(e.path());
        if path.is_empty() {
            reason
        } else {
            format!("{path}: {reason}")
        }
    })
}

/// The path as `a.b[2].c`. A map key is data rather than a field name unless it looks like an
/// identifier, so any other key shows as `?`.
fn field_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                let identifier = key.len() <= 64
                    && !key.is_empty()
                    && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                out.push_str(if identifier { key } else { "?" });
            }
            Segment::Enum { variant } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(variant);
            }
            Segment::Unknown => out.push_str(".?"),
        }
    }
    out
}

/// Replaces the parts of a serde error text that may quote payload data: every double-quoted
/// part (strings) by `"…"`, and a back-quoted part by `` `…` `` where it holds a value (after
/// `integer`, `floating point`, `boolean`, `character`, `unknown variant`, `unknown field`).
/// Back-quoted names of the type (`` missing field `to` ``, `` expected one of `a`, `b` ``) stay.
fn redact_quoted(text: &str) -> String {
    const VALUE_BEFORE: [&str; 6] = [
        "integer",
        "floating point",
        "boolean",
        "character",
        "unknown variant",
        "unknown field",
    ];
    let mut out = String::with_capacity(text.len());
    let mut inside: Option<char> = None;
    for c in text.chars() {
        match inside {
            Some(close) => {
                if c == close {
                    inside = None;
                    out.push(c);
                }
            }
            None if c == '"' => {
                out.push_str("\"…");
                inside = Some('"');
            }
            None if c == '`' && VALUE_BEFORE.iter().any(|w| out.trim_end().ends_with(w)) => {
                out.push_str("`…");
                inside = Some('`');
            }
            None => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_rejects_scalar_payload_and_non_finite_times() {
        assert!(Message::builder("t").payload("text").build().is_err());
        assert!(Message::builder("t").payload(&5).build().is_err());
        assert!(Message::builder("t").created(f64::NAN).build().is_err());
        assert!(
            Message::builder("t")
                .execute_at(f64::INFINITY)
                .build()
                .is_err()
        );
        assert!(Message::builder("t").payload(&[1, 2]).build().is_ok());
    }

    #[test]
    fn due_times_after_9999_are_refused() {
        let err = Message::builder("t").execute_at(1e300).build().unwrap_err();
        assert!(err.to_string().contains("9999"), "{err}");
        assert!(
            Message::builder("t")
                .execute_at(LATEST_DUE + 1.0)
                .build()
                .is_err()
        );
        assert!(Message::builder("t").execute_at(LATEST_DUE).build().is_ok());
        assert!(Message::builder("t").execute_at(1e10).build().is_ok());
    }

    #[test]
    fn empty_id_becomes_uuid() {
        let m = Message::builder("t").id("").build().unwrap();
        assert_eq!(m.id().len(), 36);
        let m = Message::builder("t").id("0").build().unwrap();
        assert_eq!(m.id(), "0");
    }

    #[test]
    fn payload_as_does_not_quote_payload_strings() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Mail {
            to: u32,
        }
        let m = Message::builder("t")
            .payload(&serde_json::json!({"to": "secret-address"}))
            .build()
            .unwrap();
        let err = m.payload_as::<Mail>().unwrap_err().to_string();
        assert!(!err.contains("secret-address"), "{err}");
        assert!(err.contains("to: invalid type: string"), "{err}");
        assert!(err.contains("expected u32"), "{err}");
    }

    #[test]
    fn values_are_dropped_from_serde_texts_and_names_kept() {
        for (text, want) in [
            (
                r#"invalid type: string "abc", expected u32"#,
                r#"invalid type: string "…", expected u32"#,
            ),
            (
                "invalid type: integer `42`, expected a string",
                "invalid type: integer `…`, expected a string",
            ),
            (
                "invalid value: floating point `1.5`, expected u8",
                "invalid value: floating point `…`, expected u8",
            ),
            (
                "unknown variant `Secret`, expected one of `A`, `B`",
                "unknown variant `…`, expected one of `A`, `B`",
            ),
            ("missing field `to`", "missing field `to`"),
            ("invalid type: boolean `true`", "invalid type: boolean `…`"),
        ] {
            assert_eq!(redact_quoted(text), want);
        }
    }

    #[test]
    fn the_path_of_a_nested_field_is_named_but_map_keys_that_are_data_are_not() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Order {
            lines: Vec<Line>,
            notes: std::collections::HashMap<String, u32>,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Line {
            qty: u32,
        }
        let m = Message::builder("t")
            .payload(&serde_json::json!({"lines": [{"qty": 1}, {"qty": "many"}], "notes": {}}))
            .build()
            .unwrap();
        let err = m.payload_as::<Order>().unwrap_err().to_string();
        assert!(
            err.contains("lines[1].qty: invalid type: string \"…\""),
            "{err}"
        );
        assert!(!err.contains("many"), "{err}");

        let m = Message::builder("t")
            .payload(&serde_json::json!({"lines": [], "notes": {"jane@doe.sk": "x"}}))
            .build()
            .unwrap();
        let err = m.payload_as::<Order>().unwrap_err().to_string();
        assert!(err.contains("notes.?: invalid type"), "{err}");
        assert!(!err.contains("jane"), "{err}");

        let m = Message::builder("t")
            .payload(&serde_json::json!({"notes": {}}))
            .build()
            .unwrap();
        let err = m.payload_as::<Order>().unwrap_err().to_string();
        assert!(err.contains("missing field `lines`"), "{err}");
    }

    const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn retry_copy_keeps_identity() {
        let m = Message::builder("t")
            .id("x")
            .retries(2)
            .traceparent(TRACEPARENT)
            .build()
            .unwrap();
        let copy = m.retry_copy(10.0);
        assert_eq!(copy.id(), "x");
        assert_eq!(copy.created(), m.created());
        assert_eq!(copy.retries(), 3);
        assert_eq!(copy.execute_at(), Some(10.0));
        assert_eq!(copy.traceparent(), Some(TRACEPARENT));
        let replay = copy.replay_copy(false);
        assert_eq!(replay.retries(), 0);
        assert_eq!(replay.traceparent(), Some(TRACEPARENT));
    }

    #[test]
    fn the_builder_takes_only_a_valid_traceparent() {
        assert_eq!(Message::new("t").traceparent(), None);
        let m = Message::builder("t")
            .traceparent(TRACEPARENT)
            .build()
            .unwrap();
        assert_eq!(m.traceparent(), Some(TRACEPARENT));
        assert!(format!("{m:?}").contains(TRACEPARENT), "{m:?}");
        let err = Message::builder("t")
            .traceparent("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01")
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("traceparent"), "{err}");
        assert!(Message::builder("t").traceparent("").build().is_err());
    }
}
