//! The names the driver puts in SQL: schema names, checked before any SQL is sent and always
//! quoted, and the notification channel of a schema.

use hermes_core::Error;

/// Checks that `schema` is a lower-case SQL identifier: a letter or `_`, then letters, digits
/// and `_`, 63 bytes at most (PostgreSQL's limit).
///
/// # Errors
/// [`Error::Config`] naming what is wrong.
pub(crate) fn check_schema(schema: &str) -> Result<(), Error> {
    let mut chars = schema.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if first_ok && rest_ok && schema.len() <= 63 {
        return Ok(());
    }
    Err(Error::Config {
        driver: crate::NAME,
        message: format!(
            "schema {:?} is not a lower-case SQL identifier (a letter or _, then letters, \
             digits and _, 63 bytes at most)",
            hermes_core::driver::excerpt(schema)
        ),
    })
}

/// `schema` quoted as an SQL identifier (checked by [`check_schema`], so it holds no quote).
pub(crate) fn quoted(schema: &str) -> String {
    format!("\"{schema}\"")
}

/// The channel of the schema's notifications: `hermes_<schema>`, cut to PostgreSQL's 63 bytes.
pub(crate) fn channel(schema: &str) -> String {
    let mut channel = format!("hermes_{schema}");
    channel.truncate(63);
    channel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_schemas_are_refused() {
        for bad in [
            "",
            "Hermes",
            "a-b",
            "a\"b",
            "1abc",
            "a b",
            "x; drop table y",
            &"a".repeat(64),
        ] {
            assert!(check_schema(bad).is_err(), "{bad:?}");
        }
        for good in ["hermes", "_jobs", "app_2"] {
            assert!(check_schema(good).is_ok(), "{good:?}");
        }
        assert_eq!(quoted("app_2"), "\"app_2\"");
        assert_eq!(channel("app").len(), 10);
        assert!(channel(&"a".repeat(63)).len() <= 63);
    }
}
