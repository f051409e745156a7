//! Shutdown through a Redis key, as Hermes' `RedisShutdown`.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use hermes_core::{Error, Shutdown, async_trait};

use crate::client::RedisClient;

/// Shutdown through the key `hermes_shutdown`, which holds Unix seconds: a worker stops when
/// the value is at or after the second it started and not in the future (a future value
/// schedules the shutdown). [`shutdown`](Shutdown::shutdown) sets the key. PHP and Rust workers
/// read the same key.
#[derive(Debug, Clone)]
pub struct RedisShutdown {
    client: Arc<dyn RedisClient>,
    key: String,
}

impl RedisShutdown {
    /// A shutdown signalled through `key` on `client` (see
    /// [`RedisSetDriver::client`](crate::RedisSetDriver::client)).
    pub fn new(client: Arc<dyn RedisClient>, key: impl Into<String>) -> Self {
        RedisShutdown {
            client,
            key: key.into(),
        }
    }

    /// The default key, `hermes_shutdown`.
    pub fn with_default_key(client: Arc<dyn RedisClient>) -> Self {
        RedisShutdown::new(client, "hermes_shutdown")
    }
}

fn seconds(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[async_trait]
impl Shutdown for RedisShutdown {
    async fn should_shutdown(&self, started: SystemTime) -> Result<bool, Error> {
        let value = self.client.command("GET", &[self.key.as_bytes()]).await?;
        let Some(bytes) = value.into_bytes() else {
            return Ok(false);
        };
        let Some(at) = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite())
        else {
            return Ok(false);
        };
        let at = at as i64;
        Ok(seconds(started) <= at && at <= seconds(SystemTime::now()))
    }

    async fn shutdown(&self, at: Option<SystemTime>) -> Result<(), Error> {
        let at = seconds(at.unwrap_or_else(SystemTime::now)).to_string();
        self.client
            .command("SET", &[self.key.as_bytes(), at.as_bytes()])
            .await?;
        Ok(())
    }
}
