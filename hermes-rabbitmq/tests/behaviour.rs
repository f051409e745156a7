//! The RabbitMQ driver against plain AMQP clients and a broker that refuses a declaration.

mod common;

use std::time::Duration;

use common::{RabbitHarness, amqp_url, raw, take_raw};
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, Message};
use hermes_rabbitmq::{RabbitMqDriver, RabbitMqOptions};
use hermes_testkit::suite::{Harness, unique_queue_name};
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;

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
        let (_, properties) = take_raw(&queue).await.expect("the message is on the queue");
        assert_eq!(*properties.delivery_mode(), Some(expected));
        assert_eq!(
            properties.content_type().as_ref().map(|c| c.as_str()),
            Some("application/json")
        );
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
