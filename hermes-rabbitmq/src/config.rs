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
    /// The delivery mode of published messages when not derived from `durable`.
    pub delivery_mode: Option<u8>,
    /// How long an idle worker waits between two looks at the queues. Default 100 ms.
    pub refresh_interval: Duration,
}

impl Default for RabbitMqOptions {
    fn default() -> Self {
        RabbitMqOptions {
            durable: true,
            delivery_mode: None,
            refresh_interval: Duration::from_millis(100),
        }
    }
}
