//! From a URL to a driver: each driver crate reads its own URLs.

use std::path::PathBuf;
use std::sync::Arc;

use hermes_core::{Driver, Priority};
use hermes_redis::RedisClient;

use crate::Failure;

/// The queue a URL names: its driver, and where its workers watch for the shutdown signal.
pub(crate) struct Queue {
    pub(crate) driver: Arc<dyn Driver>,
    pub(crate) backend: Backend,
}

/// The kind of backend, for what only some have.
pub(crate) enum Backend {
    /// A directory of the filesystem driver.
    Directory(PathBuf),
    /// A Redis server or cluster.
    Redis(Arc<dyn RedisClient>),
    /// A broker without a place for a shared key (RabbitMQ, SQS).
    Broker,
}

/// The URL's scheme, for messages: never the rest, which may hold a password.
pub(crate) fn scheme(url: &str) -> &str {
    url.split_once("://").map_or("", |(scheme, _)| scheme)
}

/// The driver of `url`, with the priority queues `priorities` set up.
pub(crate) async fn connect(
    url: &str,
    priorities: &[(String, Priority)],
) -> Result<Queue, Failure> {
    let queue = match scheme(url) {
        "file" => {
            let driver = hermes_fs::FileSystemDriver::from_url(url)?;
            let directory = driver.directory().to_owned();
            Queue {
                driver: Arc::new(driver),
                backend: Backend::Directory(directory),
            }
        }
        "redis" | "rediss" | "redis+cluster" => {
            let driver = hermes_redis::RedisSetDriver::from_url(url).await?;
            Queue {
                backend: Backend::Redis(driver.client()),
                driver: Arc::new(driver),
            }
        }
        "amqp" | "amqps" => Queue {
            driver: Arc::new(hermes_rabbitmq::RabbitMqDriver::from_url(url)?),
            backend: Backend::Broker,
        },
        "sqs" => Queue {
            driver: Arc::new(hermes_sqs::SqsDriver::from_url(url).await?),
            backend: Backend::Broker,
        },
        "" => {
            return Err(Failure::usage(
                "the URL needs a scheme, such as file:///var/hermes or redis://127.0.0.1:6379",
            ));
        }
        other => {
            return Err(Failure::usage(format!(
                "no driver reads {}:// URLs; the hermes command reads file://, redis://, \
                 rediss://, redis+cluster://, amqp://, amqps:// and sqs://",
                hermes_core::driver::excerpt(other)
            )));
        }
    };
    for (name, priority) in priorities {
        queue.driver.setup_priority_queue(name, *priority)?;
    }
    Ok(queue)
}
