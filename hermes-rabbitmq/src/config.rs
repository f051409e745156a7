//! Options of the RabbitMQ driver.

use std::time::Duration;

/// Options of a [`RabbitMqDriver`](crate::RabbitMqDriver). Start from
/// [`RabbitMqOptions::default`] and change fields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RabbitMqOptions {
    /// Declare queues durable and publish persistent messages (delivery mode 2). Default true;
    /// false gives non-durable queues and transient messages.
    pub durable: bool,
    /// The properties of published messages (content type, headers, expiration, …). The
    /// delivery mode, when not set here, is 2 (persistent) for a durable queue and 1 otherwise.
    pub properties: lapin::BasicProperties,
    /// How long an idle worker waits between two looks at the queues. Default 100 ms.
    pub refresh_interval: Duration,
}

impl Default for RabbitMqOptions {
    fn default() -> Self {
        RabbitMqOptions {
            durable: true,
            properties: lapin::BasicProperties::default(),
            refresh_interval: Duration::from_millis(100),
        }
    }
}
