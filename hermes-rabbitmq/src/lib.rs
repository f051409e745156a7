//! The RabbitMQ driver of Hermes, on `lapin`: Hermes' queue layout (one durable queue on the
//! default exchange, declared without arguments, persistent messages, consumed with a
//! `basic.qos` prefetch and acknowledged after the handlers), plus publisher confirms, delays of
//! any length, priorities and reconnection. See [`RabbitMqDriver`] and [`RabbitMqOptions`].
//!
//! ```no_run
//! # #[tokio::main]
//! # async fn main() -> Result<(), hermes_core::Error> {
//! use hermes_core::{Emitter, Message, DEFAULT_PRIORITY};
//! use hermes_rabbitmq::{RabbitMqDriver, RabbitMqOptions};
//!
//! let driver = RabbitMqDriver::new("amqp://guest:guest@127.0.0.1:5672/%2f", "hermes", RabbitMqOptions::default())?;
//! Emitter::new(driver).emit(&Message::new("send-email"), DEFAULT_PRIORITY).await?;
//! # Ok(()) }
//! ```

mod buffer;
mod config;
mod consumers;
mod delay;
mod driver;
mod error;
mod intake;
mod ladder;
mod naming;
mod patience;
mod session;
mod settle;

pub use config::{RabbitMqOptions, UndecodableAction};
pub use driver::RabbitMqDriver;
pub use ladder::{DELAY_LEVELS, DELAY_UNIT_MS};
pub use naming::{
    LEGACY_DELAY_LEVELS_MS, delay_level, exchanges_of, legacy_delay_queue, long_delay_queue,
    quarantine_queue, queues_of,
};
pub use session::COMMAND_TIMEOUT;

/// The driver's name: what [`Driver::name`](hermes_core::Driver::name) returns, and the
/// `driver` of its errors.
pub const NAME: &str = "rabbitmq";
