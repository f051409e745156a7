//! Queue names every driver accepts.

use crate::Error;

/// Checks a queue name: letters, digits, `.`, `_` and `-`, not empty, not starting with `.`,
/// at most 200 bytes.
///
/// # Errors
/// [`Error::InvalidQueueName`] saying what is wrong.
pub fn validate_queue_name(name: &str) -> Result<(), Error> {
    let reason = if name.is_empty() {
        Some("a queue name must not be empty")
    } else if name.starts_with('.') {
        Some("a queue name must not start with '.'")
    } else if name.len() > 200 {
        Some("a queue name must not be longer than 200 bytes")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        Some("a queue name may contain only letters, digits, '.', '_' and '-'")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidQueueName {
            name: crate::error::excerpt(name),
            reason,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names() {
        for ok in ["hermes", "a.b_c-D9", "x"] {
            assert!(validate_queue_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".hidden",
            "..",
            "a/b",
            "a\0b",
            "a b",
            "é",
            &"x".repeat(201),
        ] {
            let err = validate_queue_name(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidQueueName { .. }), "{bad:?}");
        }
    }

    #[test]
    fn a_long_name_is_cut_in_the_error() {
        let err = validate_queue_name(&"n".repeat(10_000))
            .unwrap_err()
            .to_string();
        assert!(err.len() < 300, "{} bytes: {err}", err.len());
        assert!(err.contains("10000 bytes"), "{err}");
    }
}
