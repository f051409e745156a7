//! A report-export worker on the Hermes Redis driver: what the emitter, the worker and the
//! shutdown program share.
//!
//! The programs (`cargo run -p hermes-example-redis --bin …`):
//! - `redis-emit <report> [delay seconds] [high]` queues an export;
//! - `redis-worker` runs exports until `redis-shutdown`, SIGTERM or Ctrl-C;
//! - `redis-shutdown` asks every running worker to stop (through the key `<key>_shutdown`).
//!
//! Settings come from the environment: `HERMES_REDIS_URL` (default
//! `redis://127.0.0.1:6379`), `HERMES_REDIS_CLIENT` (`redis`, the default, or `fred`),
//! `HERMES_REDIS_KEY` (the default set, default `hermes`; the urgent set is `<key>_high`),
//! `HERMES_VISIBILITY_TIMEOUT` (seconds, default 300), `HERMES_DIR` (where the export log goes).

use std::time::Duration;

use hermes_core::Driver as _;
pub use hermes_example_common::{ExportReport, Exporter, PRIORITY_HIGH, directory};
use hermes_redis::{RedisOptions, RedisSetDriver, RedisShutdown};

/// Where and how the example connects.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Redis URL.
    pub url: String,
    /// `redis` or `fred`.
    pub client: String,
    /// The default set's key.
    pub key: String,
    /// The visibility timeout, when not the driver's default.
    pub visibility_timeout: Option<Duration>,
}

impl Settings {
    /// The settings from the environment.
    pub fn from_env() -> Self {
        let var =
            |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
        Settings {
            url: var("HERMES_REDIS_URL", "redis://127.0.0.1:6379"),
            client: var("HERMES_REDIS_CLIENT", "redis"),
            key: var("HERMES_REDIS_KEY", "hermes"),
            visibility_timeout: std::env::var("HERMES_VISIBILITY_TIMEOUT")
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                .map(Duration::from_secs_f64),
        }
    }

    /// The driver both sides use: the set `<key>`, and `<key>_high` for urgent exports.
    ///
    /// # Errors
    /// When Redis cannot be reached or a setting is invalid.
    pub async fn driver(&self) -> Result<RedisSetDriver, hermes_core::Error> {
        let mut options = RedisOptions::default();
        options.key = self.key.clone();
        options.schedule_key = format!("{}_schedule", self.key);
        if let Some(timeout) = self.visibility_timeout {
            options.visibility_timeout = timeout;
        }
        let driver = match self.client.as_str() {
            "fred" => RedisSetDriver::connect_fred(&self.url, options).await?,
            _ => RedisSetDriver::connect_redis(&self.url, options).await?,
        };
        driver.setup_priority_queue(&format!("{}_high", self.key), PRIORITY_HIGH)?;
        Ok(driver)
    }

    /// The shutdown signal the workers watch: the key `<key>_shutdown`.
    pub fn shutdown(&self, driver: &RedisSetDriver) -> RedisShutdown {
        RedisShutdown::new(driver.client(), format!("{}_shutdown", self.key))
    }
}

/// [`Settings::driver`] with the settings from the environment.
///
/// # Errors
/// When Redis cannot be reached or a setting is invalid.
pub async fn driver() -> Result<RedisSetDriver, hermes_core::Error> {
    Settings::from_env().driver().await
}

/// [`Settings::shutdown`] with the settings from the environment.
pub fn shutdown(driver: &RedisSetDriver) -> RedisShutdown {
    Settings::from_env().shutdown(driver)
}
