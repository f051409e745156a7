//! The filesystem driver's URL: `file:///var/hermes?queue=exports`.

use hermes_core::{DriverUrl, Error};
use std::path::PathBuf;

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
        let mut url = DriverUrl::parse(url, crate::NAME, &["file"])?;
        let directory = PathBuf::from(url.path()?);
        if url.host().is_some_and(|h| !h.is_empty()) || !directory.is_absolute() {
            return Err(
                url.error("the path of a file:// URL must be absolute (file:///var/hermes)")
            );
        }
        let queue = url.take("queue").unwrap_or_else(|| "hermes".to_owned());
        let mut options = FileSystemOptions::default();
        if let Some(timeout) = url.take_seconds("visibility_timeout")? {
            options.visibility_timeout = timeout;
        }
        if let Some(durable) = url.take_bool("durable")? {
            options.durable = durable;
        }
        url.finish(&["queue", "visibility_timeout", "durable"])?;
        FileSystemDriver::with_options(directory, &queue, options)
    }
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
            ("file:///tmp/%ff", "UTF-8"),
        ] {
            let err = FileSystemDriver::from_url(url).unwrap_err().to_string();
            assert!(err.contains(says), "{url}: {err}");
        }
        assert!(FileSystemDriver::from_url("file:///tmp?queue=../up").is_err());
    }
}
