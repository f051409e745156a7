//! Driver URLs, such as `redis://127.0.0.1:6379/0?key=hermes`: the helper every driver crate's
//! `from_url` reads its URL with, so all of them take parameters, escapes and mistakes alike.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::Error;

/// A driver URL taken apart: its scheme, host, port, path, credentials and query parameters,
/// each decoded. A driver crate takes the parameters it knows one by one and calls
/// [`finish`](DriverUrl::finish), which refuses any other.
///
/// No error it returns, and not its `Debug`, shows the password or the URL.
///
/// ```
/// use std::time::Duration;
/// use hermes_core::driver::DriverUrl;
///
/// let mut url = DriverUrl::parse("redis://:s3cret@127.0.0.1:6380/2?key=jobs&refresh=0.5", "redis", &["redis"])?;
/// assert_eq!(url.host(), Some("127.0.0.1"));
/// assert_eq!(url.port(), Some(6380));
/// assert_eq!(url.password().as_deref(), Some("s3cret"));
/// assert_eq!(url.take("key").as_deref(), Some("jobs"));
/// assert_eq!(url.take_seconds("refresh")?, Some(Duration::from_millis(500)));
/// url.finish(&["key", "refresh"])?;
///
/// let err = DriverUrl::parse("redis://:s3cret@127.0.0.1/?colour=red", "redis", &["redis"])?
///     .finish(&["key"])
///     .unwrap_err();
/// assert!(err.to_string().contains("colour"));
/// assert!(!err.to_string().contains("s3cret"));
/// # Ok::<(), hermes_core::Error>(())
/// ```
#[derive(Clone)]
pub struct DriverUrl {
    url: url::Url,
    driver: &'static str,
    params: Vec<(String, String)>,
}

impl DriverUrl {
    /// Parses `text`, a URL of one of `schemes`, for the driver `driver` (its errors name it).
    ///
    /// # Errors
    /// [`Error::Config`] for text that is not a URL, or a URL of another scheme.
    pub fn parse(text: &str, driver: &'static str, schemes: &[&str]) -> Result<Self, Error> {
        let url = url::Url::parse(text).map_err(|e| config(driver, format!("not a URL: {e}")))?;
        if !schemes.contains(&url.scheme()) {
            let wanted: Vec<String> = schemes.iter().map(|s| format!("{s}://")).collect();
            return Err(config(
                driver,
                format!(
                    "a {driver} URL starts with {}, not {}://",
                    wanted.join(" or "),
                    url.scheme()
                ),
            ));
        }
        let params = url.query_pairs().into_owned().collect();
        Ok(DriverUrl {
            url,
            driver,
            params,
        })
    }

    /// The scheme, such as `redis`.
    pub fn scheme(&self) -> &str {
        self.url.scheme()
    }

    /// The host, when there is one (`hermes` in `sqs://hermes`).
    pub fn host(&self) -> Option<&str> {
        self.url.host_str()
    }

    /// The port, when the URL gives one.
    pub fn port(&self) -> Option<u16> {
        self.url.port()
    }

    /// The path, decoded (`/var/hermes`; `/%2f` gives `//`).
    ///
    /// # Errors
    /// [`Error::Config`] when an escape in it is not UTF-8.
    pub fn path(&self) -> Result<String, Error> {
        decode(self.driver, self.url.path())
    }

    /// The user name, decoded; `None` when empty.
    pub fn username(&self) -> Option<String> {
        let name = self.url.username();
        (!name.is_empty()).then(|| decode(self.driver, name).unwrap_or_else(|_| name.to_owned()))
    }

    /// The password, decoded.
    pub fn password(&self) -> Option<String> {
        self.url
            .password()
            .map(|p| decode(self.driver, p).unwrap_or_else(|_| p.to_owned()))
    }

    /// The URL without its query: what to hand to the client library, which does not know
    /// the driver's parameters. It holds the password: never log it.
    pub fn without_query(&self) -> String {
        let mut url = self.url.clone();
        url.set_query(None);
        url.set_fragment(None);
        url.into()
    }

    /// Removes the parameter `name` and returns its decoded value (the last one when it is
    /// given twice).
    pub fn take(&mut self, name: &str) -> Option<String> {
        let mut value = None;
        self.params.retain(|(n, v)| {
            if n == name {
                value = Some(v.clone());
                false
            } else {
                true
            }
        });
        value
    }

    /// Removes the parameter `name` and parses it; `what` says what it should be.
    ///
    /// # Errors
    /// [`Error::Config`] naming the parameter when the value does not parse.
    pub fn take_parsed<T: FromStr>(&mut self, name: &str, what: &str) -> Result<Option<T>, Error> {
        self.take(name)
            .map(|value| {
                value
                    .parse()
                    .map_err(|_| config(self.driver, format!("{name} is {what}")))
            })
            .transpose()
    }

    /// Removes the parameter `name`, a number of seconds (`0.5` allowed).
    ///
    /// # Errors
    /// [`Error::Config`] when it is not a non-negative number.
    pub fn take_seconds(&mut self, name: &str) -> Result<Option<Duration>, Error> {
        let seconds: Option<f64> = self.take_parsed(name, "a number of seconds")?;
        seconds
            .map(|s| {
                Duration::try_from_secs_f64(s)
                    .map_err(|_| config(self.driver, format!("{name} is a number of seconds")))
            })
            .transpose()
    }

    /// Removes the parameter `name`, `true` or `false`.
    ///
    /// # Errors
    /// [`Error::Config`] for any other value.
    pub fn take_bool(&mut self, name: &str) -> Result<Option<bool>, Error> {
        self.take_parsed(name, "true or false")
    }

    /// Checks that no parameter is left but those taken: an unknown one is an error naming it
    /// and the ones `known`.
    ///
    /// # Errors
    /// [`Error::Config`] for a parameter left.
    pub fn finish(self, known: &[&str]) -> Result<(), Error> {
        match self.params.first() {
            None => Ok(()),
            Some((name, _)) => Err(config(
                self.driver,
                format!(
                    "unknown parameter {name:?}: a {}:// URL takes {}",
                    self.url.scheme(),
                    known.join(", ")
                ),
            )),
        }
    }

    /// A configuration error of this URL's driver.
    pub fn error(&self, message: impl Into<String>) -> Error {
        config(self.driver, message.into())
    }
}

impl fmt::Debug for DriverUrl {
    /// The scheme, host and port only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DriverUrl")
            .field("scheme", &self.url.scheme())
            .field("host", &self.url.host_str())
            .field("port", &self.url.port())
            .finish_non_exhaustive()
    }
}

fn config(driver: &'static str, message: String) -> Error {
    Error::Config { driver, message }
}

/// Decodes `%XX` escapes.
fn decode(driver: &'static str, text: &str) -> Result<String, Error> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| config(driver, "a %-escape in the URL is not UTF-8".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_escapes_and_mistakes() {
        let url = DriverUrl::parse(
            "amqp://gu%40st:p%40ss@127.0.0.1:5672/%2f?queue=jobs",
            "rabbitmq",
            &["amqp", "amqps"],
        )
        .unwrap();
        assert_eq!(url.username().as_deref(), Some("gu@st"));
        assert_eq!(url.password().as_deref(), Some("p@ss"));
        assert_eq!(url.path().unwrap(), "//");
        assert_eq!(
            url.without_query(),
            "amqp://gu%40st:p%40ss@127.0.0.1:5672/%2f"
        );
        assert!(!format!("{url:?}").contains("p%40ss"));
        let err = DriverUrl::parse("redis://:pw@x/", "sqs", &["sqs"]).unwrap_err();
        assert!(err.to_string().contains("sqs://"), "{err}");
        assert!(!err.to_string().contains("pw"), "{err}");
        assert!(DriverUrl::parse("not a url", "redis", &["redis"]).is_err());
        let mut url = DriverUrl::parse("sqs://q?wait=-1&flag=maybe", "sqs", &["sqs"]).unwrap();
        assert!(url.take_seconds("wait").is_err());
        assert!(url.take_bool("flag").is_err());
        assert!(url.finish(&[]).is_ok(), "both were taken");
    }
}
