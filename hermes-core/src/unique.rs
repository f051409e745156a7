//! Unique jobs: an emit that is not queued while another message with the same key holds it.

use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::{Error, Message};

/// How long a uniqueness key is held when nothing else says: one hour.
pub const DEFAULT_UNIQUE_WINDOW: Duration = Duration::from_secs(3600);

/// The longest a uniqueness key is held: ten years.
pub const MAX_UNIQUE_WINDOW: Duration = Duration::from_secs(10 * 366 * 24 * 3600);

pub use crate::message::MAX_UNIQUE_KEY_LEN;

/// Asks an emit to be unique: while a message holds `key`, another emit with the key is not
/// queued, and says so with [`Emitted::Duplicate`].
///
/// The key is held from the emit until the message is done (acknowledged after its handlers
/// ran, or dead-lettered; a retry keeps holding it), or, with
/// [`until_window_ends`](Unique::until_window_ends), until the window ends whatever happens to
/// the message. Either way the key expires by itself at the end of the window, so a message
/// whose worker crashed cannot hold it for ever: give a window longer than the message may
/// wait and run.
///
/// ```
/// # async fn demo() -> Result<(), hermes_core::Error> {
/// use std::time::Duration;
/// use hermes_core::{Emitted, Emitter, Message, Unique, DEFAULT_PRIORITY};
/// use hermes_testkit::MemoryDriver;
///
/// let emitter = Emitter::new(MemoryDriver::new());
/// let message = Message::builder("export").payload(&[7]).build()?;
/// let unique = Unique::of(&message).hold_for(Duration::from_secs(600));
/// assert_eq!(emitter.emit_unique(&message, DEFAULT_PRIORITY, &unique).await?, Emitted::Queued);
///
/// // The same type and payload again, while the first waits: not queued.
/// let again = Message::builder("export").payload(&[7]).build()?;
/// assert_eq!(emitter.emit_unique(&again, DEFAULT_PRIORITY, &unique).await?, Emitted::Duplicate);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unique {
    key: String,
    window: Duration,
    release: Release,
}

/// When a [`Unique`] key is given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Release {
    /// When the message is done (acknowledged or dead-lettered), or at the end of the window
    /// if that comes first. The default.
    #[default]
    WhenDone,
    /// At the end of the window only.
    AtWindowEnd,
}

/// What an emit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Emitted {
    /// The message was queued.
    Queued,
    /// Another message holds the uniqueness key: this one was not queued.
    Duplicate,
}

impl Unique {
    /// Unique by `key`, which the application chooses (`"invoice:42"`), held until the message
    /// is done or for [`DEFAULT_UNIQUE_WINDOW`].
    pub fn by(key: impl Into<String>) -> Self {
        Unique {
            key: key.into(),
            window: DEFAULT_UNIQUE_WINDOW,
            release: Release::WhenDone,
        }
    }

    /// Unique by the type and payload of `message`: the key is its type, a `:`, and the
    /// SHA-256 of its payload as Hermes' JSON writes it (the same for every process).
    pub fn of(message: &Message) -> Self {
        let mut digest = Sha256::new();
        if let Some(payload) = message.payload() {
            let mut bytes = Vec::new();
            // Payloads of built messages are always writable; an unwritable one hashes empty.
            let _ = crate::serializer::write_value(&mut bytes, payload);
            digest.update(&bytes);
        }
        let hash: String = digest.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Unique::by(format!("{}:{hash}", message.message_type()))
    }

    /// The same, held for at most `window`.
    #[must_use]
    pub fn hold_for(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// The same, held until the window ends even once the message is done: no other message
    /// with the key is queued within the window (at most one an hour, say).
    #[must_use]
    pub fn until_window_ends(mut self) -> Self {
        self.release = Release::AtWindowEnd;
        self
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// How long the key is held at most.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// When the key is given up.
    pub fn release(&self) -> Release {
        self.release
    }

    /// Checks the key and the window.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] for an empty key, a key over [`MAX_UNIQUE_KEY_LEN`] bytes, or
    /// a window under a millisecond or over [`MAX_UNIQUE_WINDOW`].
    pub fn check(&self) -> Result<(), Error> {
        if self.key.is_empty() {
            return Err(Error::InvalidMessage("the uniqueness key is empty".into()));
        }
        if self.key.len() > MAX_UNIQUE_KEY_LEN {
            return Err(Error::InvalidMessage(format!(
                "the uniqueness key has {} bytes, more than {MAX_UNIQUE_KEY_LEN}",
                self.key.len()
            )));
        }
        if self.window < Duration::from_millis(1) {
            return Err(Error::InvalidMessage(
                "the uniqueness window is shorter than a millisecond".into(),
            ));
        }
        if self.window > MAX_UNIQUE_WINDOW {
            return Err(Error::InvalidMessage(
                "the uniqueness window is longer than ten years".into(),
            ));
        }
        Ok(())
    }

    /// The key's name on a backend: `unique-` and the hex SHA-256 of the key, so that any key
    /// makes a valid, bounded file or Redis key name.
    pub fn backend_name(&self) -> String {
        unique_backend_name(&self.key)
    }
}

/// The backend name of the uniqueness key `key`; see [`Unique::backend_name`].
pub fn unique_backend_name(key: &str) -> String {
    let hash: String = Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("unique-{hash}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{JsonSerializer, Serializer};

    #[test]
    fn the_key_of_a_message_comes_from_its_type_and_payload() {
        let message = |payload: serde_json::Value| {
            Message::builder("export")
                .payload(&payload)
                .build()
                .unwrap()
        };
        let a = Unique::of(&message(serde_json::json!({"report": 7})));
        let b = Unique::of(&message(serde_json::json!({"report": 7})));
        let c = Unique::of(&message(serde_json::json!({"report": 8})));
        assert_eq!(a, b, "the same for every message of that type and payload");
        assert_ne!(a.key(), c.key());
        assert!(a.key().starts_with("export:") && a.key().len() == "export:".len() + 32);
        assert_ne!(Unique::of(&Message::new("export")).key(), a.key());
    }

    #[test]
    fn bad_keys_and_windows_are_refused() {
        assert!(Unique::by("").check().is_err());
        assert!(
            Unique::by("k".repeat(MAX_UNIQUE_KEY_LEN + 1))
                .check()
                .is_err()
        );
        assert!(Unique::by("k").hold_for(Duration::ZERO).check().is_err());
        assert!(Unique::by("k").hold_for(Duration::MAX).check().is_err());
        assert!(Unique::by("k".repeat(MAX_UNIQUE_KEY_LEN)).check().is_ok());
    }

    #[test]
    fn backend_names_are_bounded_and_plain() {
        let name = Unique::by("../../etc/passwd\n\u{0}{tag}").backend_name();
        assert_eq!(name.len(), "unique-".len() + 64);
        assert!(name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    }

    #[test]
    fn a_foreign_unique_key_that_is_not_a_short_string_is_ignored() {
        for bad in ["1", "\"\"", "null", "{\"a\":1}"] {
            let bytes = format!(
                "{{\"message\":{{\"id\":\"i\",\"type\":\"t\",\"created\":1,\"payload\":null,\"execute_at\":null,\"retries\":0,\"unique_key\":{bad}}}}}"
            );
            let message = JsonSerializer.deserialize(bytes.as_bytes()).unwrap();
            assert_eq!(message.unique_key(), None, "{bad}");
        }
        let long = format!(
            "{{\"message\":{{\"id\":\"i\",\"type\":\"t\",\"created\":1,\"unique_key\":\"{}\"}}}}",
            "k".repeat(MAX_UNIQUE_KEY_LEN + 1)
        );
        assert_eq!(
            JsonSerializer
                .deserialize(long.as_bytes())
                .unwrap()
                .unique_key(),
            None
        );
    }
}
