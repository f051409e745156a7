//! The filesystem driver's URL: `file:///var/hermes?queue=exports`.

use std::path::PathBuf;

use hermes_core::Error;
use hermes_core::driver::DriverUrl;

use crate::FileSystemOptions;

/// What a `file://` URL says: the directory, the default queue's name and the options.
#[derive(Debug)]
pub(crate) struct UrlConfig {
    pub(crate) directory: PathBuf,
    pub(crate) queue: String,
    pub(crate) options: FileSystemOptions,
}

impl UrlConfig {
    /// Reads `url`; see [`FileSystemDriver::from_url`](crate::FileSystemDriver::from_url).
    ///
    /// # Errors
    /// [`Error::Config`] for a URL of another scheme, a relative path, an unknown parameter or
    /// a bad value.
    pub(crate) fn parse(url: &str) -> Result<Self, Error> {
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
        Ok(UrlConfig {
            directory,
            queue,
            options,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_and_escapes_are_read_and_mistakes_named() {
        let config =
            UrlConfig::parse("file:///tmp/my%20queues?queue=exports&durable=true").unwrap();
        assert_eq!(config.directory, std::path::Path::new("/tmp/my queues"));
        assert_eq!(config.queue, "exports");
        assert!(config.options.durable);
        for (url, says) in [
            ("redis://x", "file://"),
            ("file://tmp", "absolute"),
            ("file:///tmp?colour=red", "unknown parameter"),
            ("file:///tmp?visibility_timeout=-1", "seconds"),
            ("file:///tmp/%ff", "UTF-8"),
        ] {
            let err = UrlConfig::parse(url).unwrap_err().to_string();
            assert!(err.contains(says), "{url}: {err}");
        }
    }
}
