//! The keys payloads are sealed with: each has an id, stored beside what it sealed, so keys
//! can rotate while older messages still open.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hermes_core::Error;
use zeroize::Zeroizing;

/// The longest key id.
pub const KEY_ID_LIMIT: usize = 64;

/// A 256-bit key and its id. Neither its `Debug` nor any error shows the key.
#[derive(Clone)]
pub struct SealKey {
    id: String,
    key: Zeroizing<[u8; 32]>,
}

impl SealKey {
    /// The key `key` under the id `id` (1 to [`KEY_ID_LIMIT`] letters, digits, `.`, `_`, `-`;
    /// a date such as `2026-12` does well).
    ///
    /// # Errors
    /// [`Error::Config`] for an id that breaks the rules.
    pub fn new(id: impl Into<String>, key: [u8; 32]) -> Result<Self, Error> {
        let id = id.into();
        check_id(&id)?;
        Ok(SealKey {
            id,
            key: Zeroizing::new(key),
        })
    }

    /// A key given as 32 bytes in standard base64 (`openssl rand -base64 32` writes one).
    ///
    /// # Errors
    /// [`Error::Config`] for a bad id, or text that is not base64 of 32 bytes (the error does
    /// not quote it).
    pub fn from_base64(id: impl Into<String>, text: &str) -> Result<Self, Error> {
        let id = id.into();
        check_id(&id)?;
        let bytes = Zeroizing::new(STANDARD.decode(text.trim()).map_err(|_| {
            config(format!(
                "the key {id:?} is not base64 (give 32 random bytes in standard base64)"
            ))
        })?);
        let key: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
            config(format!(
                "the key {id:?} holds {} bytes, not 32",
                bytes.len()
            ))
        })?;
        SealKey::new(id, key)
    }

    /// A new random key under `id`.
    ///
    /// # Errors
    /// [`Error::Config`] for an id that breaks the rules.
    pub fn generate(id: impl Into<String>) -> Result<Self, Error> {
        SealKey::new(id, rand::random())
    }

    /// The key in standard base64, to store it where the application keeps its secrets.
    pub fn to_base64(&self) -> Zeroizing<String> {
        Zeroizing::new(STANDARD.encode(*self.key))
    }

    /// The key id, stored beside each payload it seals.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn bytes(&self) -> &[u8; 32] {
        &self.key
    }
}

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// The key new payloads are sealed with, and the keys kept for opening older ones.
#[derive(Clone, Debug)]
pub struct SealKeys {
    current: SealKey,
    older: Vec<SealKey>,
}

impl SealKeys {
    /// Keys that seal with `current` and open what it sealed.
    pub fn new(current: SealKey) -> Self {
        SealKeys {
            current,
            older: Vec::new(),
        }
    }

    /// Also opens what `key` sealed (a key rotated out), without sealing with it.
    #[must_use]
    pub fn keep_for_reading(mut self, key: SealKey) -> Self {
        self.older.push(key);
        self
    }

    /// Keys written as `id:base64,id:base64,…`, the current one first, as the `hermes`
    /// command reads them from `HERMES_SEAL_KEYS`.
    ///
    /// # Errors
    /// [`Error::Config`] for an empty list, an entry without `:`, a bad id or key, or an id
    /// given twice; no error quotes a key.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let mut keys = text
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                let (id, key) = entry.split_once(':').ok_or_else(|| {
                    config("seal keys are written id:base64,id:base64 (the current one first)")
                })?;
                SealKey::from_base64(id.trim(), key)
            });
        let current = keys.next().ok_or_else(|| config("no seal key given"))??;
        let mut all = SealKeys::new(current);
        for key in keys {
            let key = key?;
            if all.find(key.id()).is_some() {
                return Err(config(format!("the key id {:?} is given twice", key.id())));
            }
            all = all.keep_for_reading(key);
        }
        Ok(all)
    }

    /// The key new payloads are sealed with.
    pub fn current(&self) -> &SealKey {
        &self.current
    }

    /// The key with id `id`, if kept.
    pub fn find(&self, id: &str) -> Option<&SealKey> {
        std::iter::once(&self.current)
            .chain(&self.older)
            .find(|key| key.id() == id)
    }
}

fn check_id(id: &str) -> Result<(), Error> {
    let fine = !id.is_empty()
        && id.len() <= KEY_ID_LIMIT
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if fine {
        Ok(())
    } else {
        Err(config(format!(
            "a key id is 1 to {KEY_ID_LIMIT} letters, digits, '.', '_' or '-', not {:?}",
            hermes_core::driver::excerpt(id)
        )))
    }
}

fn config(message: impl Into<String>) -> Error {
    Error::Config {
        driver: "seal",
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_and_never_show() {
        let a = SealKey::generate("2026-12").unwrap();
        let b = SealKey::generate("2026-06").unwrap();
        let text = format!("2026-12:{}, 2026-06:{}", *a.to_base64(), *b.to_base64());
        let keys = SealKeys::parse(&text).unwrap();
        assert_eq!(keys.current().id(), "2026-12");
        assert_eq!(keys.find("2026-06").unwrap().bytes(), b.bytes());
        assert!(keys.find("2025-01").is_none());
        let shown = format!("{keys:?}");
        assert!(!shown.contains(a.to_base64().as_str()), "{shown}");
        assert!(!shown.contains(b.to_base64().as_str()), "{shown}");
    }

    #[test]
    fn mistakes_are_named_without_the_key() {
        let secret = "c2VjcmV0LWJ1dC10b28tc2hvcnQ=";
        for (text, says) in [
            ("", "no seal key"),
            ("just-a-key", "id:base64"),
            (&format!("k1:{secret}") as &str, "not 32"),
            ("k1:not base64 at all!", "not base64"),
            (&format!("bad id:{secret}"), "key id"),
        ] {
            let err = SealKeys::parse(text).unwrap_err().to_string();
            assert!(err.contains(says), "{text}: {err}");
            assert!(!err.contains(secret), "{err}");
        }
        let key = SealKey::generate("k1").unwrap();
        let twice = format!("k1:{},k1:{}", *key.to_base64(), *key.to_base64());
        assert!(
            SealKeys::parse(&twice)
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
    }
}
