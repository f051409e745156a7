//! The filesystem driver's URL: `file:///var/hermes?queue=exports`.

use std::path::PathBuf;
use std::time::Duration;

use hermes_core::Error;

use crate::{FileSystemDriver, FileSystemOptions};

impl FileSystemDriver {
    /// A driver from a URL `file://<absolute directory>?queue=<name>`, as the `hermes` command
    /// and programs that take their queue from the environment use. Parameters, all optional:
    /// `queue` (default `hermes`), `visibility_timeout` (seconds, default 300) and `durable`
    /// (`true` or `false`). A `%XX` escape in the path or a value stands for that byte.
    ///
    /// ```
    /// use hermes_core::Driver;
    /// use hermes_fs::FileSystemDriver;
    ///
    /// let driver = FileSystemDriver::from_url("file:///var/hermes?queue=exports")?;
    /// assert_eq!(driver.directory(), std::path::Path::new("/var/hermes"));
    /// assert!(FileSystemDriver::from_url("file://relative/dir").is_err());
    /// # Ok::<(), hermes_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] for a URL of another scheme, a relative path, an unknown parameter or
    /// a bad value; [`Error::InvalidQueueName`] for a bad queue name.
    pub fn from_url(url: &str) -> Result<Self, Error> {
        let rest = url
            .strip_prefix("file://")
            .ok_or_else(|| config("a filesystem URL starts with file://"))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let directory = PathBuf::from(decode(path)?);
        if !directory.is_absolute() {
            return Err(config(
                "the path of a file:// URL must be absolute (file:///var/hermes)",
            ));
        }
        let mut queue = "hermes".to_owned();
        let mut options = FileSystemOptions::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = decode(value)?;
            match name {
                "queue" => queue = value,
                "visibility_timeout" => {
                    let seconds: f64 = value
                        .parse()
                        .ok()
                        .filter(|s: &f64| s.is_finite() && *s >= 0.0)
                        .ok_or_else(|| config("visibility_timeout is a number of seconds"))?;
                    options.visibility_timeout = Duration::from_secs_f64(seconds);
                }
                "durable" => {
                    options.durable = value
                        .parse()
                        .map_err(|_| config("durable is true or false"))?;
                }
                _ => {
                    return Err(config(
                        "unknown parameter: a file:// URL takes queue, visibility_timeout and durable",
                    ));
                }
            }
        }
        FileSystemDriver::with_options(directory, &queue, options)
    }
}

fn config(reason: &str) -> Error {
    Error::Config {
        driver: crate::NAME,
        message: reason.to_owned(),
    }
}

/// Decodes `%XX` escapes.
fn decode(text: &str) -> Result<String, Error> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| config("a % in a URL starts a two-digit hex escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| config("a URL escape is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_and_escapes_are_read_and_mistakes_named() {
        let driver =
            FileSystemDriver::from_url("file:///tmp/my%20queues?queue=exports&durable=true")
                .unwrap();
        assert_eq!(driver.directory(), std::path::Path::new("/tmp/my queues"));
        assert!(driver.queue_path(100).unwrap().ends_with("exports"));
        for (url, says) in [
            ("redis://x", "file://"),
            ("file://tmp", "absolute"),
            ("file:///tmp?colour=red", "unknown parameter"),
            ("file:///tmp?visibility_timeout=-1", "seconds"),
            ("file:///tmp/%zz", "hex"),
        ] {
            let err = FileSystemDriver::from_url(url).unwrap_err().to_string();
            assert!(err.contains(says), "{url}: {err}");
        }
        assert!(FileSystemDriver::from_url("file:///tmp?queue=../up").is_err());
    }
}
