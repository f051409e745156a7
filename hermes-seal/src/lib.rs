//! Sealed and compressed payloads for Hermes: [`SealingSerializer`] stores each message's
//! payload encrypted (XChaCha20-Poly1305, under rotating [`SealKeys`]), compressed (zstd), or
//! both, on any backend, while the rest of the message stays Hermes' JSON.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use hermes_core::{DEFAULT_PRIORITY, Driver, Message};
//! use hermes_seal::{SealKey, SealKeys, SealingSerializer};
//! use hermes_testkit::MemoryDriver;
//!
//! // The current key seals; the one before it still opens what it sealed.
//! let keys = SealKeys::new(SealKey::generate("2026-12")?)
//!     .keep_for_reading(SealKey::generate("2026-06")?);
//! let driver = MemoryDriver::new().with_serializer(SealingSerializer::new(keys));
//!
//! let message = Message::builder("send-email")
//!     .payload(&serde_json::json!({"to": "someone@example.com"}))
//!     .build()?;
//! driver.send(&message, DEFAULT_PRIORITY).await?;
//! let delivery = driver.receive(&[], std::time::Duration::ZERO).await?.unwrap();
//! assert_eq!(delivery.message().payload(), message.payload());
//! # Ok(()) }
//! ```
//!
//! A sealed payload, as a queue stores it:
//!
//! ```json
//! {"message":{"id":"…","type":"send-email","created":1764806400.5,"payload":{"$hermes":{"v":1,"key":"2026-12","zstd":false,"data":"<base64 of a 24-byte nonce and the ciphertext>"}},"execute_at":null,"retries":0}}
//! ```
//!
//! The seal's associated data is the message's id and type, the key id and whether the payload
//! was compressed. Keep keys where the application keeps its secrets; the `hermes` command
//! reads them from `HERMES_SEAL_KEYS` (`id:base64,id:base64`, the current one first).

mod envelope;
mod keys;
mod serializer;

pub use keys::{KEY_ID_LIMIT, SealKey, SealKeys};
pub use serializer::{OPENED_LIMIT, SealingSerializer};

/// What a payload in stored form says about itself, for tools that show messages without
/// opening them: the key that sealed it (none when it is only compressed), whether it is
/// compressed, and how many bytes it holds. `None` for a payload in plain form.
pub fn stored_form(payload: Option<&serde_json::Value>) -> Option<StoredForm> {
    let envelope = envelope::Envelope::read(payload)?.ok()?;
    Some(StoredForm {
        key: envelope.key,
        compressed: envelope.zstd,
        len: envelope.data.len(),
    })
}

/// A payload in stored form, as [`stored_form`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredForm {
    /// The id of the key that sealed it; none when it is only compressed.
    pub key: Option<String>,
    /// Whether it is zstd-compressed.
    pub compressed: bool,
    /// How many bytes it holds.
    pub len: usize,
}
