//! Shared by the RabbitMQ driver's tests: the broker's address and the conformance harness.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use hermes_core::{Error, async_trait};
use hermes_rabbitmq::{
    QueueType, RabbitMqDriver, RabbitMqOptions, exchanges_of, quarantine_queue, queues_of,
};
use hermes_testkit::suite::Harness;
use lapin::options::{
    BasicGetOptions, BasicPublishOptions, ExchangeDeleteOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Connection, ConnectionProperties};

/// The broker the tests use: `HERMES_AMQP_URL`, default `amqp://guest:guest@127.0.0.1:5672/%2f`.
pub fn amqp_url() -> String {
    std::env::var("HERMES_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

/// A plain AMQP connection, as a program without Hermes would use.
pub async fn raw() -> Result<Connection, String> {
    let url = amqp_url();
    let connect = Connection::connect(&url, ConnectionProperties::default());
    tokio::time::timeout(Duration::from_secs(5), connect)
        .await
        .map_err(|_| format!("no answer from {} within 5 s", amqp_url()))?
        .map_err(|e| format!("cannot connect to {}: {e}", amqp_url()))
}

/// Declares `queue` durable and without arguments on `channel`, as Hermes does.
pub async fn declare_durable(channel: &lapin::Channel, queue: &str) {
    declare_typed(channel, queue, QueueType::Classic).await;
}

/// Declares `queue` durable on `channel`, of `queue_type` (a classic queue without arguments,
/// as Hermes declares it).
pub async fn declare_typed(channel: &lapin::Channel, queue: &str, queue_type: QueueType) {
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    let mut arguments = FieldTable::default();
    if queue_type != QueueType::Classic {
        arguments.insert(
            "x-queue-type".into(),
            AMQPValue::LongString(queue_type.as_str().into()),
        );
    }
    channel
        .queue_declare(queue.into(), durable, arguments)
        .await
        .expect("declaring the queue");
}

/// Publishes `bytes` to the existing `queue` on the default exchange with a plain client, as a
/// program without Hermes would, and waits for the publish.
pub async fn publish_raw(queue: &str, bytes: &[u8]) {
    let connection = raw().await.expect("the broker is reachable");
    let channel = connection.create_channel().await.expect("a channel");
    channel
        .basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions::default(),
            bytes,
            BasicProperties::default(),
        )
        .await
        .expect("publishing")
        .await
        .expect("the publish");
    let _ = connection.close(200, "bye".into()).await;
}

/// Takes the oldest message of the existing `queue` with a plain client, as a program without
/// Hermes would (`basic.get` without acknowledgement): its body and properties; `None` when
/// none is ready.
pub async fn take_raw(queue: &str) -> Option<(Vec<u8>, BasicProperties)> {
    let connection = raw().await.expect("the broker is reachable");
    let channel = connection.create_channel().await.expect("a channel");
    let no_ack = BasicGetOptions { no_ack: true };
    let got = channel
        .basic_get(queue.into(), no_ack)
        .await
        .expect("getting a message");
    let _ = connection.close(200, "bye".into()).await;
    got.map(|got| (got.delivery.data, got.delivery.properties))
}

/// How many messages wait in `queue`, ready for delivery (0 when it does not exist).
pub async fn ready(queue: &str) -> u32 {
    let connection = raw().await.expect("the broker is reachable");
    let channel = connection.create_channel().await.expect("a channel");
    let passive = QueueDeclareOptions {
        passive: true,
        durable: true,
        ..QueueDeclareOptions::default()
    };
    let count = channel
        .queue_declare(queue.into(), passive, FieldTable::default())
        .await
        .map_or(0, |q| q.message_count());
    let _ = connection.close(200, "bye".into()).await;
    count
}

/// Runs `rabbitmqctl` with `args` and returns what it printed.
pub fn rabbitmqctl(args: &[&str]) -> String {
    let output = std::process::Command::new("rabbitmqctl")
        .args(args)
        .output()
        .expect("rabbitmqctl runs");
    assert!(
        output.status.success(),
        "rabbitmqctl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The conformance harness: each test has its own queues on the shared broker, of one type.
pub struct RabbitHarness {
    queue_type: QueueType,
}

/// The harness on classic queues, as Hermes declares them.
pub const CLASSIC: RabbitHarness = RabbitHarness {
    queue_type: QueueType::Classic,
};

/// The harness on quorum queues.
pub const QUORUM: RabbitHarness = RabbitHarness {
    queue_type: QueueType::Quorum,
};

#[async_trait]
impl Harness for RabbitHarness {
    type Driver = RabbitMqDriver;

    async fn available(&self) -> Result<(), String> {
        let connection = raw().await?;
        let _ = connection.close(200, "bye".into()).await;
        Ok(())
    }

    async fn open(&self, queue: &str) -> Result<RabbitMqDriver, Error> {
        let mut options = RabbitMqOptions::default();
        options.refresh_interval = Duration::from_millis(20);
        // Room for two claims at once, as the inspection scenarios hold one message in
        // flight while dead-lettering another.
        options.prefetch = 2;
        options.queue_type = self.queue_type;
        RabbitMqDriver::new(&amqp_url(), queue, options)
    }

    async fn open_with(
        &self,
        queue: &str,
        serializer: std::sync::Arc<dyn hermes_core::Serializer>,
    ) -> Result<RabbitMqDriver, Error> {
        Ok(self.open(queue).await?.with_serializer(serializer))
    }

    async fn push_raw(&self, queue: &str, bytes: &[u8]) -> Result<(), Error> {
        let connection = raw().await.expect("the broker is reachable");
        let channel = connection.create_channel().await.expect("a channel");
        declare_typed(&channel, queue, self.queue_type).await;
        let _ = connection.close(200, "bye".into()).await;
        publish_raw(queue, bytes).await;
        Ok(())
    }

    async fn pull_raw(&self, queue: &str) -> Result<Option<Vec<u8>>, Error> {
        Ok(take_raw(queue).await.map(|(body, _)| body))
    }

    async fn quarantined(&self, queue: &str) -> Result<usize, Error> {
        Ok(ready(&quarantine_queue(queue)).await as usize)
    }

    /// A claimed message comes back as soon as its connection closes.
    fn visibility_timeout(&self) -> Duration {
        Duration::ZERO
    }

    /// The server is at a fixed address: a copy of the test binary builds the same harness.
    fn environment_of_copies(&self) -> Option<Vec<(String, String)>> {
        Some(Vec::new())
    }

    async fn cleanup(&self, queue: &str) {
        let Ok(connection) = raw().await else { return };
        let Ok(channel) = connection.create_channel().await else {
            return;
        };
        for base in [
            queue.to_owned(),
            format!("{queue}-high"),
            format!("{queue}-low"),
        ] {
            for name in queues_of(&base) {
                let _ = channel
                    .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
                    .await;
            }
            for name in exchanges_of(&base) {
                let _ = channel
                    .exchange_delete(name.as_str().into(), ExchangeDeleteOptions::default())
                    .await;
            }
        }
        let _ = connection.close(200, "bye".into()).await;
    }
}
