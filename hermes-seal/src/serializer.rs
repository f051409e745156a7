//! The serializer that stores each message's payload sealed, compressed, or both.

use std::borrow::Cow;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hermes_core::{DecodeError, Error, JsonSerializer, Message, Serializer};
use serde_json::Value;

use crate::envelope::{Envelope, bound_to};
use crate::keys::SealKeys;

/// The most bytes a compressed payload may open into: a larger one is refused, so a small
/// message cannot make a worker allocate without bound.
pub const OPENED_LIMIT: usize = 32 * 1024 * 1024;

/// The zstd level payloads are compressed at.
const ZSTD_LEVEL: i32 = 3;

/// The bytes of an XChaCha20-Poly1305 nonce, stored before the ciphertext.
const NONCE_LEN: usize = 24;

/// A [`Serializer`] that stores each message's payload in another form, and gives it back as
/// it was: sealed with XChaCha20-Poly1305 under the current key of a [`SealKeys`], compressed
/// with zstd when it is large, or both (compressed, then sealed).
///
/// The message around the payload stays in the inner serializer's format
/// ([`JsonSerializer`], Hermes' JSON, by default): its id, type, times and retries are in
/// clear, so routing, delays, the `hermes` command and PHP's decoder work as before, while
/// the payload is an object `{"$hermes":{…}}` (see the crate docs) that only a holder of the
/// key reads. A PHP Hermes handler cannot read a sealed payload.
///
/// - A seal is bound to the message's id and type: a sealed payload copied into another
///   message does not open.
/// - A payload that does not open (tampered with, sealed with a key not kept, cut short, or
///   opening past [`OPENED_LIMIT`]) makes the message undecodable: the worker keeps it as a
///   dead letter with the reason, and no handler sees it. No reason shows a key or a byte of
///   the payload.
/// - A payload in plain form (sent before sealing began, or by a PHP emitter) is read as it
///   is, unless [`require_sealed`](SealingSerializer::require_sealed).
///
/// ```
/// use hermes_core::{Message, Serializer};
/// use hermes_seal::{SealKey, SealKeys, SealingSerializer};
///
/// let keys = SealKeys::new(SealKey::generate("2026-12")?);
/// let serializer = SealingSerializer::new(keys).compress_over(4096);
///
/// let message = Message::builder("send-email")
///     .payload(&serde_json::json!({"to": "someone@example.com"}))
///     .build()?;
/// let bytes = serializer.serialize(&message)?;
/// assert!(!String::from_utf8_lossy(&bytes).contains("someone@example.com"));
/// assert_eq!(serializer.deserialize(&bytes)?.payload(), message.payload());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct SealingSerializer<S = JsonSerializer> {
    inner: S,
    keys: Option<SealKeys>,
    compress_over: Option<usize>,
    require_sealed: bool,
}

impl SealingSerializer<JsonSerializer> {
    /// Seals every payload with the current key of `keys`, and opens what any of them sealed.
    pub fn new(keys: SealKeys) -> Self {
        SealingSerializer {
            inner: JsonSerializer,
            keys: Some(keys),
            compress_over: None,
            require_sealed: false,
        }
    }

    /// Seals nothing and compresses each payload whose JSON is over `bytes` long.
    pub fn compress_only(bytes: usize) -> Self {
        SealingSerializer {
            inner: JsonSerializer,
            keys: None,
            compress_over: Some(bytes),
            require_sealed: false,
        }
    }
}

impl<S: Serializer> SealingSerializer<S> {
    /// The same, around `inner` instead of [`JsonSerializer`].
    pub fn around<T: Serializer>(self, inner: T) -> SealingSerializer<T> {
        SealingSerializer {
            inner,
            keys: self.keys,
            compress_over: self.compress_over,
            require_sealed: self.require_sealed,
        }
    }

    /// Also compresses (with zstd, before sealing) each payload whose JSON is over `bytes`
    /// long.
    #[must_use]
    pub fn compress_over(mut self, bytes: usize) -> Self {
        self.compress_over = Some(bytes);
        self
    }

    /// Refuses payloads in plain form as undecodable (once every emitter seals).
    #[must_use]
    pub fn require_sealed(mut self) -> Self {
        self.require_sealed = true;
        self
    }

    /// `message` with its payload in stored form (`message` itself when there is nothing to
    /// store otherwise: no payload, or one too small to compress and no keys).
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] when the payload cannot be written or compressed.
    pub fn seal<'m>(&self, message: &'m Message) -> Result<Cow<'m, Message>, Error> {
        let Some(payload) = message.payload() else {
            return Ok(Cow::Borrowed(message));
        };
        if self.keys.is_none() && self.compress_over.is_none() {
            return Ok(Cow::Borrowed(message));
        }
        let json = serde_json::to_vec(payload)
            .map_err(|e| Error::InvalidMessage(format!("the payload cannot be written: {e}")))?;
        let zstd = self.compress_over.is_some_and(|over| json.len() > over);
        let plain = if zstd {
            zstd::bulk::compress(&json, ZSTD_LEVEL)
                .map_err(|e| Error::InvalidMessage(format!("compressing the payload: {e}")))?
        } else {
            json
        };
        let envelope = match &self.keys {
            Some(keys) => {
                let key = keys.current();
                let aad = bound_to(message.id(), message.message_type(), key.id(), zstd);
                let nonce: [u8; NONCE_LEN] = rand::random();
                let cipher = XChaCha20Poly1305::new(key.bytes().into());
                let sealed = cipher
                    .encrypt(
                        XNonce::from_slice(&nonce),
                        Payload {
                            msg: &plain,
                            aad: &aad,
                        },
                    )
                    .map_err(|_| Error::InvalidMessage("sealing the payload failed".into()))?;
                let mut data = Vec::with_capacity(NONCE_LEN + sealed.len());
                data.extend_from_slice(&nonce);
                data.extend_from_slice(&sealed);
                Envelope {
                    key: Some(key.id().to_owned()),
                    zstd,
                    data,
                }
            }
            None if zstd => Envelope {
                key: None,
                zstd,
                data: plain,
            },
            None => return Ok(Cow::Borrowed(message)),
        };
        Ok(Cow::Owned(
            message.with_payload(Some(envelope.to_payload())),
        ))
    }

    /// `message` with its payload opened: as it was before [`seal`](SealingSerializer::seal).
    ///
    /// # Errors
    /// Why the payload does not open, in words that show no key and no byte of it.
    pub fn open(&self, message: Message) -> Result<Message, String> {
        let envelope = match Envelope::read(message.payload()) {
            None if self.require_sealed && message.payload().is_some() => {
                return Err("the payload is not sealed, and this worker requires seals".into());
            }
            None => return Ok(message),
            Some(envelope) => envelope?,
        };
        let plain = match &envelope.key {
            Some(id) => {
                let keys = self
                    .keys
                    .as_ref()
                    .ok_or("the payload is sealed, and this serializer holds no keys")?;
                let key = keys.find(id).ok_or_else(|| {
                    format!("the payload is sealed with the key {id:?}, which is not kept")
                })?;
                if envelope.data.len() < NONCE_LEN {
                    return Err("the sealed payload is cut short".into());
                }
                let (nonce, sealed) = envelope.data.split_at(NONCE_LEN);
                let aad = bound_to(message.id(), message.message_type(), id, envelope.zstd);
                XChaCha20Poly1305::new(key.bytes().into())
                    .decrypt(
                        XNonce::from_slice(nonce),
                        Payload {
                            msg: sealed,
                            aad: &aad,
                        },
                    )
                    .map_err(|_| {
                        format!(
                            "the sealed payload does not open with the key {id:?}: it was altered, \
                             or sealed for another message"
                        )
                    })?
            }
            None if self.require_sealed => {
                return Err("the payload is not sealed, and this worker requires seals".into());
            }
            None => envelope.data,
        };
        let json = if envelope.zstd {
            zstd::bulk::decompress(&plain, OPENED_LIMIT).map_err(|_| {
                format!("the compressed payload does not open within {OPENED_LIMIT} bytes")
            })?
        } else {
            plain
        };
        let payload: Value = serde_json::from_slice(&json).map_err(|e| {
            format!(
                "the opened payload is not JSON (line {}, column {})",
                e.line(),
                e.column()
            )
        })?;
        Ok(message.with_payload(Some(payload)))
    }
}

impl<S: Serializer> Serializer for SealingSerializer<S> {
    fn serialize(&self, message: &Message) -> Result<Vec<u8>, Error> {
        self.inner.serialize(&*self.seal(message)?)
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Message, DecodeError> {
        let message = self.inner.deserialize(bytes)?;
        self.open(message)
            .map_err(|reason| DecodeError::new(reason, bytes))
    }
}
