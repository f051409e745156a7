//! The RabbitMQ driver against plain AMQP clients and a broker that refuses a declaration.

mod common;

use std::time::Duration;

use common::{RabbitHarness, amqp_url, raw};
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, JsonSerializer, Message, Serializer};
use hermes_rabbitmq::{RabbitMqDriver, RabbitMqOptions};
use hermes_testkit::suite::{Harness, unique_queue_name};
use lapin::options::{BasicAckOptions, BasicGetOptions, QueueDeclareOptions};
use lapin::types::FieldTable;

const PHP_JSON: &str = r#"{"message":{"id":"php-1","type":"send-email","created":1637617498.172724,"payload":{"to":"a\/b@x.sk"},"execute_at":null,"retries":0}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hermes_json_from_a_plain_client_is_handled_and_ours_reads_back_raw() {
    let queue = unique_queue_name("wire");
    RabbitHarness
        .push_raw(&queue, PHP_JSON.as_bytes())
        .await
        .unwrap();
    let driver = RabbitHarness.open(&queue).await.unwrap();
    let d = driver
        .receive(&[], Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.message().id(), "php-1");
    assert_eq!(d.message().payload().unwrap()["to"], "a/b@x.sk");
    driver.ack(&d).await.unwrap();
    // The worker's consumer would take the next message: stop it.
    driver.flush().await.unwrap();

    let m = Message::builder("t")
        .id("rust-1")
        .created(1700000000.0)
        .build()
        .unwrap();
    driver.send(&m, DEFAULT_PRIORITY).await.unwrap();
    let connection = raw().await.unwrap();
    let channel = connection.create_channel().await.unwrap();
    let got = channel
        .basic_get(queue.as_str().into(), BasicGetOptions::default())
        .await
        .unwrap()
        .expect("the message is on the queue");
    assert_eq!(got.delivery.data, JsonSerializer.serialize(&m).unwrap());
    assert_eq!(
        *got.delivery.properties.delivery_mode(),
        Some(2),
        "persistent"
    );
    got.delivery
        .acker
        .ack(BasicAckOptions::default())
        .await
        .unwrap();
    RabbitHarness.cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_declaration_is_a_clear_error_naming_the_queue() {
    let queue = unique_queue_name("refused");
    let connection = raw().await.unwrap();
    let channel = connection.create_channel().await.unwrap();
    // An existing non-durable queue, as an older deployment might have left.
    channel
        .queue_declare(
            queue.as_str().into(),
            QueueDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let driver = RabbitMqDriver::new(&amqp_url(), &queue, RabbitMqOptions::default()).unwrap();
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        driver.send(&Message::new("t"), DEFAULT_PRIORITY),
    )
    .await
    .expect("an answer, not a hang")
    .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Config { .. }), "{text}");
    assert!(text.contains(&queue), "{text}");
    assert!(text.contains("durable"), "{text}");
    // How to share a queue older Hermes declared non-durable, and no retrying in vain.
    assert!(text.contains("`durable: false`"), "{text}");
    assert!(!err.is_temporary(), "{text}");

    // With matching options the same queue works.
    let mut options = RabbitMqOptions::default();
    options.durable = false;
    let transient = RabbitMqDriver::new(&amqp_url(), &queue, options).unwrap();
    transient
        .send(&Message::new("t"), DEFAULT_PRIORITY)
        .await
        .unwrap();
    let d = transient
        .receive(&[], Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    transient.ack(&d).await.unwrap();
    RabbitHarness.cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_properties_are_published_and_a_set_delivery_mode_wins() {
    for (mode, expected) in [(None, 2), (Some(1), 1)] {
        let queue = unique_queue_name("properties");
        let mut options = RabbitMqOptions::default();
        let mut properties =
            lapin::BasicProperties::default().with_content_type("application/json".into());
        if let Some(mode) = mode {
            properties = properties.with_delivery_mode(mode);
        }
        options.properties = properties;
        let driver = RabbitMqDriver::new(&amqp_url(), &queue, options).unwrap();
        driver
            .send(&Message::new("t"), DEFAULT_PRIORITY)
            .await
            .unwrap();
        let connection = raw().await.unwrap();
        let channel = connection.create_channel().await.unwrap();
        let got = channel
            .basic_get(queue.as_str().into(), BasicGetOptions::default())
            .await
            .unwrap()
            .expect("the message is on the queue");
        let properties = &got.delivery.properties;
        assert_eq!(*properties.delivery_mode(), Some(expected));
        assert_eq!(
            properties.content_type().as_ref().map(|c| c.as_str()),
            Some("application/json")
        );
        got.delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .unwrap();
        RabbitHarness.cleanup(&queue).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serializer_given_is_used() {
    let queue = unique_queue_name("serializer");
    let plain = RabbitHarness.open(&queue).await.unwrap();
    let tagged = RabbitHarness
        .open(&queue)
        .await
        .unwrap()
        .with_serializer(hermes_testkit::TaggedSerializer);
    hermes_testkit::check_serializer_is_used(&plain, &tagged).await;
    RabbitHarness.cleanup(&queue).await;
}
