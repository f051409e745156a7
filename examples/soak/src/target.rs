//! Where a run's queue is, and how every process of the run connects to it.

use std::sync::Arc;
use std::time::Duration;

use hermes_core::driver::WithStore;
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, Priority};
use hermes_fs::{FileSystemDriver, FileSystemOptions};
use hermes_postgres::{PostgresDriver, PostgresOptions};
use hermes_rabbitmq::{RabbitMqDriver, RabbitMqOptions};
use hermes_redis::{RedisOptions, RedisSetDriver};
use hermes_sqs::{SqsDriver, SqsOptions, aws_sdk_sqs};

use crate::args::{DriverKind, WorkerArgs};

/// The priority of the run's urgent messages; they go to the queue `<queue>_high`.
pub const PRIORITY_HIGH: Priority = DEFAULT_PRIORITY + 100;

/// The queue of a run on one backend.
#[derive(Debug, Clone)]
pub struct Target {
    /// The backend.
    pub kind: DriverKind,
    /// A URL, an endpoint or a folder.
    pub endpoint: String,
    /// The default queue's name.
    pub queue: String,
    /// The visibility timeout of claims.
    pub visibility: Duration,
    /// The Redis URL of a store for records and groups, for a broker that keeps neither
    /// (RabbitMQ, SQS).
    pub store: Option<String>,
}

impl Target {
    /// The target a worker process was started for.
    pub fn of_worker(args: &WorkerArgs) -> Self {
        Target {
            kind: args.driver,
            endpoint: args.endpoint.clone(),
            queue: args.queue.clone(),
            visibility: args.visibility,
            store: args.store.clone(),
        }
    }

    /// The name of the urgent messages' queue.
    pub fn high_queue(&self) -> String {
        format!("{}_high", self.queue)
    }

    /// A driver on this queue, with the urgent queue set up; `concurrency` sizes what it
    /// prefetches.
    ///
    /// # Errors
    /// When the backend cannot be reached or a setting is refused.
    pub async fn connect(&self, concurrency: usize) -> Result<Arc<dyn Driver>, Error> {
        let driver: Arc<dyn Driver> = match self.kind {
            DriverKind::Fs => {
                let mut options = FileSystemOptions::default();
                options.visibility_timeout = self.visibility;
                Arc::new(FileSystemDriver::with_options(
                    &self.endpoint,
                    &self.queue,
                    options,
                )?)
            }
            DriverKind::Redis | DriverKind::RedisFred => {
                let mut options = RedisOptions::default();
                options.key = self.queue.clone();
                options.schedule_key = format!("{}_schedule", self.queue);
                options.visibility_timeout = self.visibility;
                Arc::new(if self.endpoint.starts_with("redis+sentinel://") {
                    // The run's Sentinel group: its URL carries the replica wait.
                    let client = if self.kind == DriverKind::Redis {
                        "redis"
                    } else {
                        "fred"
                    };
                    let url = format!(
                        "{}&client={client}&key={}&schedule_key={}&visibility_timeout={}",
                        self.endpoint,
                        options.key,
                        options.schedule_key,
                        self.visibility.as_secs_f64()
                    );
                    Box::pin(RedisSetDriver::from_url(&url)).await?
                } else if self.kind == DriverKind::Redis {
                    RedisSetDriver::connect_redis(&self.endpoint, options).await?
                } else {
                    RedisSetDriver::connect_fred(&self.endpoint, options).await?
                })
            }
            DriverKind::Rabbitmq => {
                let mut options = RabbitMqOptions::default();
                options.prefetch = u16::try_from(concurrency.max(1)).unwrap_or(u16::MAX);
                self.with_store(RabbitMqDriver::new(&self.endpoint, &self.queue, options)?)
                    .await?
            }
            DriverKind::Sqs => {
                let mut options = SqsOptions::default();
                options.visibility_timeout = Some(self.visibility);
                self.with_store(SqsDriver::with_options(
                    sqs_client(&self.endpoint).await,
                    &self.queue,
                    options,
                )?)
                .await?
            }
            DriverKind::Postgres => {
                let mut options = PostgresOptions::default();
                options.schema = "hermes_soak".to_owned();
                options.visibility_timeout = self.visibility;
                options.pool_size = concurrency.clamp(2, 8);
                Arc::new(PostgresDriver::connect(&self.endpoint, &self.queue, options).await?)
            }
            DriverKind::Memory => {
                // One process holds the memory driver: its workers are threads (see `pool`).
                return Err(Error::Unsupported {
                    driver: "memory",
                    what: "worker processes",
                });
            }
        };
        driver.setup_priority_queue(&self.high_queue(), PRIORITY_HIGH)?;
        Ok(driver)
    }

    /// `broker` alone, or with the store at [`store`](Self::store) for its records and groups:
    /// the Redis keys under `<queue>_store`.
    async fn with_store<D: Driver>(&self, broker: D) -> Result<Arc<dyn Driver>, Error> {
        let Some(url) = &self.store else {
            return Ok(Arc::new(broker));
        };
        let mut options = RedisOptions::default();
        options.key = self.store_key();
        options.schedule_key = format!("{}_schedule", options.key);
        let store = RedisSetDriver::connect_redis(url, options).await?;
        Ok(Arc::new(WithStore::new(broker, store)))
    }

    /// The prefix of the store's keys.
    pub fn store_key(&self) -> String {
        format!("{}_store", self.queue)
    }
}

/// An SQS client for a local SQS-compatible server at `endpoint`, with its test credentials.
pub async fn sqs_client(endpoint: &str) -> aws_sdk_sqs::Client {
    let credentials =
        aws_sdk_sqs::config::Credentials::new("test", "test", None, None, "hermes-soak");
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(credentials)
        .endpoint_url(endpoint)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .load()
        .await;
    aws_sdk_sqs::Client::new(&config)
}
