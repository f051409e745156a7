//! A queue's configuration file, shared by the `hermes` command, emitters and workers: the
//! driver URL and the priority queues.

use std::path::Path;

use crate::{Driver, Error, Priority};

/// What a configuration file names: the queue's URL (read by the driver crate's `from_url`)
/// and its priority queues besides the default one. The file is TOML:
///
/// ```toml
/// url = "redis://127.0.0.1:6379/0?key=hermes"
///
/// [priorities]
/// hermes_high = 200
/// hermes_low = 50
/// ```
///
/// ```
/// use hermes_core::{Driver, QueueConfig};
/// use hermes_testkit::MemoryDriver;
///
/// let config = QueueConfig::from_toml("url = \"file:///var/hermes\"\n[priorities]\nhermes_high = 200\n")?;
/// assert_eq!(config.url.as_deref(), Some("file:///var/hermes"));
/// let driver = MemoryDriver::new();
/// config.setup(&driver)?;
/// # Ok::<(), hermes_core::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueConfig {
    /// The driver URL, such as `file:///var/hermes?queue=exports`; `None` when the file leaves
    /// it to the program (`--url`, `HERMES_URL`).
    pub url: Option<String>,
    /// The priority queues, as (name, priority), in the file's order.
    pub priorities: Vec<(String, Priority)>,
}

impl QueueConfig {
    /// Reads the file at `path`.
    ///
    /// # Errors
    /// [`Error::ConfigFile`] when it cannot be read or is not such a file. The error names the
    /// line, never its text (it may hold a password).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::ConfigFile {
            path: path.display().to_string(),
            message: format!("cannot read it: {e}"),
        })?;
        QueueConfig::from_toml(&text).map_err(|e| match e {
            Error::ConfigFile { message, .. } => Error::ConfigFile {
                path: path.display().to_string(),
                message,
            },
            other => other,
        })
    }

    /// Reads the TOML `text`.
    ///
    /// # Errors
    /// [`Error::ConfigFile`] for text that is not TOML, an unknown key, or a priority that is
    /// not a whole number.
    pub fn from_toml(text: &str) -> Result<Self, Error> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].lines().count().max(1));
            let message = e.message().trim_end().to_owned();
            invalid(match line {
                Some(line) => format!("line {line}: {message}"),
                None => message,
            })
        })?;
        let mut config = QueueConfig::default();
        for (key, value) in table {
            match (key.as_str(), value) {
                ("url", toml::Value::String(url)) => config.url = Some(url),
                ("url", _) => return Err(invalid("url is a string".to_owned())),
                ("priorities", toml::Value::Table(priorities)) => {
                    for (name, priority) in priorities {
                        let priority = priority
                            .as_integer()
                            .and_then(|p| Priority::try_from(p).ok())
                            .ok_or_else(|| {
                                invalid(format!(
                                    "the priority of {:?} is not a whole number",
                                    crate::error::excerpt(&name)
                                ))
                            })?;
                        config.priorities.push((name, priority));
                    }
                }
                ("priorities", _) => {
                    return Err(invalid(
                        "priorities is a table of queue names and priorities".to_owned(),
                    ));
                }
                (other, _) => {
                    return Err(invalid(format!(
                        "unknown key {:?}: the file takes url and priorities",
                        crate::error::excerpt(other)
                    )));
                }
            }
        }
        Ok(config)
    }

    /// Sets up the priority queues on `driver`.
    ///
    /// # Errors
    /// As [`Driver::setup_priority_queue`].
    pub fn setup(&self, driver: &dyn Driver) -> Result<(), Error> {
        for (name, priority) in &self.priorities {
            driver.setup_priority_queue(name, *priority)?;
        }
        Ok(())
    }
}

fn invalid(message: String) -> Error {
    Error::ConfigFile {
        path: "the configuration".to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mistakes_name_the_line_not_its_text() {
        let err = QueueConfig::from_toml("url = \"redis://:hunter2@x\n").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("line 1"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        for (toml, says) in [
            ("colour = 1", "unknown key"),
            ("url = 1", "url is a string"),
            ("[priorities]\nhigh = \"x\"", "whole number"),
            ("priorities = 3", "table"),
        ] {
            let err = QueueConfig::from_toml(toml).unwrap_err().to_string();
            assert!(err.contains(says), "{toml}: {err}");
        }
        let config = QueueConfig::from_toml("[priorities]\nb = 1\na = 2\n").unwrap();
        assert_eq!(config.url, None);
        assert_eq!(
            config.priorities,
            [("b".to_owned(), 1), ("a".to_owned(), 2)]
        );
    }

    #[test]
    fn a_missing_file_is_named() {
        let err = QueueConfig::load("/nonexistent/hermes.toml").unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/hermes.toml"),
            "{err}"
        );
    }
}
