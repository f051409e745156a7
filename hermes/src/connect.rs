//! From a URL to a driver, for every backend this build has.

use std::fmt;

use hermes_core::driver::excerpt;
use hermes_core::{Driver, Error, Priority};

use crate::AnyDriver;

/// The driver of the queue `url` names, as the `hermes` command reads it: `file://`,
/// `redis://`, `rediss://`, `redis+cluster://`, `redis+sentinel://`, `amqp://`, `amqps://`,
/// `sqs://`, `postgres://`, `postgresql://` or `memory://`, each read by its backend crate
/// (which documents its parameters), when this build has the backend's feature.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), hermes::Error> {
/// let driver = hermes::connect("memory://doc-connect").await?;
///
/// let err = hermes::connect("mysql://app:s3cret@db/jobs").await.unwrap_err();
/// assert!(err.to_string().contains("mysql://"), "{err}");
/// assert!(!err.to_string().contains("s3cret"), "never the password");
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::Config`] for a URL without a scheme, a scheme no backend reads, a backend this
/// build leaves out (it names the feature to enable), or what the backend refuses in the URL
/// (an unknown parameter, a bad value); connection errors of backends that connect at once.
/// No error shows the URL's password.
pub async fn connect(url: &str) -> Result<AnyDriver, Error> {
    Connect::new(url).open().await
}

/// A driver opened from a URL, with options the URL does not carry: [`connect`] with more
/// said.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), hermes::Error> {
/// use hermes::{Connect, DEFAULT_PRIORITY, Driver, Message};
///
/// let driver = Connect::new("memory://doc-connect-with")
///     .priority_queue("urgent", DEFAULT_PRIORITY + 10)
///     .open()
///     .await?;
/// driver.send(&Message::new("ping"), DEFAULT_PRIORITY + 10).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Connect {
    url: String,
    priority_queues: Vec<(String, Priority)>,
}

impl Connect {
    /// Opens the queue `url` names (see [`connect`] for the URLs).
    pub fn new(url: impl Into<String>) -> Self {
        Connect {
            url: url.into(),
            priority_queues: Vec::new(),
        }
    }

    /// Sets up the queue `name` for `priority` on the driver, as
    /// [`Driver::setup_priority_queue`] does.
    #[must_use]
    pub fn priority_queue(mut self, name: impl Into<String>, priority: Priority) -> Self {
        self.priority_queues.push((name.into(), priority));
        self
    }

    /// The driver, with its priority queues set up.
    ///
    /// # Errors
    /// As [`connect`]; [`Error::InvalidQueueName`] for a priority queue's name the backend
    /// refuses.
    ///
    /// # Cancellation safety
    /// Dropping the future before it returns leaves nothing behind but what the backend's own
    /// connecting leaves (a connection being closed).
    pub async fn open(self) -> Result<AnyDriver, Error> {
        let driver = open(&self.url).await?;
        for (name, priority) in &self.priority_queues {
            driver.setup_priority_queue(name, *priority)?;
        }
        Ok(driver)
    }
}

impl fmt::Debug for Connect {
    /// The scheme and the priority queues: never the rest of the URL, which may hold a
    /// password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connect")
            .field("scheme", &scheme(&self.url))
            .field("priority_queues", &self.priority_queues)
            .finish_non_exhaustive()
    }
}

/// The schemes each backend reads, with the features that bring it.
const BACKENDS: [(&[&str], &str); 6] = [
    (&["file"], "`fs`"),
    (
        &["redis", "rediss", "redis+cluster", "redis+sentinel"],
        "`redis` or `fred`",
    ),
    (&["amqp", "amqps"], "`rabbitmq`"),
    (&["sqs"], "`sqs`"),
    (&["postgres", "postgresql"], "`postgres`"),
    (&["memory"], "`memory`"),
];

/// The URL's scheme, lower case; `""` when it has none. Never the rest, which may hold a
/// password.
fn scheme(url: &str) -> String {
    url.split_once("://")
        .map_or_else(String::new, |(scheme, _)| scheme.to_ascii_lowercase())
}

async fn open(url: &str) -> Result<AnyDriver, Error> {
    let scheme = scheme(url);
    match scheme.as_str() {
        #[cfg(feature = "fs")]
        "file" => Ok(AnyDriver::FileSystem(
            hermes_fs::FileSystemDriver::from_url(url)?,
        )),
        #[cfg(any(feature = "redis", feature = "fred"))]
        "redis" | "rediss" | "redis+cluster" | "redis+sentinel" => Ok(AnyDriver::Redis(
            hermes_redis::RedisSetDriver::from_url(url).await?,
        )),
        #[cfg(feature = "rabbitmq")]
        "amqp" | "amqps" => Ok(AnyDriver::RabbitMq(
            hermes_rabbitmq::RabbitMqDriver::from_url(url)?,
        )),
        #[cfg(feature = "sqs")]
        "sqs" => Ok(AnyDriver::Sqs(hermes_sqs::SqsDriver::from_url(url).await?)),
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => Ok(AnyDriver::Postgres(
            hermes_postgres::PostgresDriver::from_url(url).await?,
        )),
        #[cfg(feature = "memory")]
        "memory" => memory::open(url).map(AnyDriver::Memory),
        "" => Err(refused(
            "the URL needs a scheme, such as file:///var/hermes or redis://127.0.0.1:6379"
                .to_owned(),
        )),
        other => Err(refused(not_read(other))),
    }
}

/// Why this build reads no `scheme://` URLs.
fn not_read(scheme: &str) -> String {
    let known = BACKENDS
        .iter()
        .find(|(schemes, _)| schemes.contains(&scheme));
    match known {
        Some((_, features)) => format!(
            "this build reads no {scheme}:// URLs: enable the {features} feature of the hermes \
             crate"
        ),
        None => format!(
            "no backend reads {}:// URLs; the hermes crate reads {}",
            excerpt(scheme),
            BACKENDS
                .iter()
                .flat_map(|(schemes, _)| schemes.iter())
                .map(|s| format!("{s}://"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn refused(message: String) -> Error {
    Error::Config {
        driver: "hermes",
        message,
    }
}

/// `memory://name`: the queues of that name in this process, the same ones for every URL that
/// names them.
#[cfg(feature = "memory")]
mod memory {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};

    use hermes_core::Error;
    use hermes_core::driver::DriverUrl;
    use hermes_testkit::{MemoryDriver, MemoryOptions};

    /// The drivers opened so far, by name.
    static OPENED: OnceLock<Mutex<HashMap<String, MemoryDriver>>> = OnceLock::new();

    pub(super) fn open(url: &str) -> Result<MemoryDriver, Error> {
        let mut url = DriverUrl::parse(url, "memory", &["memory"])?;
        let name = url.host().unwrap_or("hermes").to_owned();
        let queue = url.take("queue").unwrap_or_else(|| "hermes".to_owned());
        let visibility_timeout = url.take_seconds("visibility_timeout")?;
        url.finish(&["queue", "visibility_timeout"])?;
        let mut opened = OPENED
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(driver) = opened.get(&name) {
            return Ok(driver.clone());
        }
        let mut options = MemoryOptions::default();
        options.queue = queue;
        if let Some(timeout) = visibility_timeout {
            options.visibility_timeout = timeout;
        }
        let driver = MemoryDriver::with_options(options)?;
        opened.insert(name, driver.clone());
        Ok(driver)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scheme_is_read_without_the_rest() {
        assert_eq!(scheme("REDIS://:pw@host"), "redis");
        assert_eq!(scheme("no scheme"), "");
        let debug = format!("{:?}", Connect::new("amqp://guest:s3cret@host/%2f"));
        assert!(
            debug.contains("amqp") && !debug.contains("s3cret"),
            "{debug}"
        );
    }

    #[test]
    fn an_unknown_scheme_is_named_cut_and_the_known_ones_listed() {
        let message = not_read(&"x".repeat(500));
        assert!(message.len() < 400, "{message}");
        assert!(
            message.contains("file://") && message.contains("sqs://"),
            "{message}"
        );
        assert!(not_read("sqs").contains("`sqs` feature"));
    }
}
