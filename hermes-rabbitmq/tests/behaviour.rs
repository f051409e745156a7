//! The RabbitMQ driver against plain AMQP clients, a broker that refuses a declaration, and
//! quorum queues.

mod common;

use std::time::Duration;

use common::{CLASSIC, amqp_url, rabbitmqctl, raw, take_raw};
use hermes_core::inspect::{DeadKind, DeadReason};
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, Message};
use hermes_rabbitmq::{
    DELAY_LEVELS, QueueType, RabbitMqDriver, RabbitMqOptions, delay_level, quarantine_queue,
};
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
    CLASSIC.cleanup(&queue).await;
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
        CLASSIC.cleanup(&queue).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serializer_given_is_used() {
    let queue = unique_queue_name("serializer");
    let plain = CLASSIC.open(&queue).await.unwrap();
    let tagged = CLASSIC
        .open(&queue)
        .await
        .unwrap()
        .with_serializer(hermes_testkit::TaggedSerializer);
    hermes_testkit::check_serializer_is_used(&plain, &tagged).await;
    CLASSIC.cleanup(&queue).await;
}

/// With `queue_type: Quorum` every queue the driver declares is a quorum queue: the priority
/// queue, the delay ladder's levels and the dead-letter queue; a classic driver on the same
/// queue gets a clear error naming the option.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_queues_are_declared_as_quorum_and_a_classic_driver_is_told_why_not() {
    let queue = unique_queue_name("quorum-type");
    let mut options = RabbitMqOptions::default();
    options.queue_type = QueueType::Quorum;
    let driver = RabbitMqDriver::new(&amqp_url(), &queue, options).unwrap();
    let due_later = Message::builder("t")
        .delay(Duration::from_secs(60))
        .build()
        .unwrap();
    driver.send(&due_later, DEFAULT_PRIORITY).await.unwrap();
    let failed = Message::new("t");
    driver.send(&failed, DEFAULT_PRIORITY).await.unwrap();
    let delivery = driver
        .receive(&[], Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    driver
        .dead_letters()
        .unwrap()
        .add(&delivery, &DeadReason::new(DeadKind::Failed, "boom"))
        .await
        .unwrap();

    let listed = rabbitmqctl(&[
        "list_queues",
        "--quiet",
        "--no-table-headers",
        "name",
        "type",
    ]);
    let type_of = |name: &str| {
        listed
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name}\t")))
            .map(str::trim)
            .unwrap_or_else(|| panic!("{name} is declared: {listed}"))
            .to_owned()
    };
    let ladder: Vec<String> = (0..DELAY_LEVELS)
        .map(|level| delay_level(&queue, level))
        .filter(|name| listed.contains(&format!("{name}\t")))
        .collect();
    assert!(
        !ladder.is_empty(),
        "the delay went down the ladder: {listed}"
    );
    for name in [queue.clone(), quarantine_queue(&queue)]
        .into_iter()
        .chain(ladder)
    {
        assert_eq!(type_of(&name), "quorum", "{name}");
    }

    let classic = RabbitMqDriver::new(&amqp_url(), &queue, RabbitMqOptions::default()).unwrap();
    let err = classic
        .send(&Message::new("t"), DEFAULT_PRIORITY)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Config { .. }), "{text}");
    assert!(text.contains("queue_type"), "{text}");
    CLASSIC.cleanup(&queue).await;
}

#[test]
fn a_quorum_queue_that_is_not_durable_is_refused() {
    let mut options = RabbitMqOptions::default();
    options.queue_type = QueueType::Quorum;
    options.durable = false;
    let err = RabbitMqDriver::new(&amqp_url(), "hermes", options).unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err}");
    assert!(err.to_string().contains("durable"), "{err}");
}

/// A driver with fallback URLs connects to the first node that answers: a node that is down
/// passes the turn to the next, and with none up the error is temporary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_is_down_passes_the_turn_to_the_next() {
    let queue = unique_queue_name("fallback");
    // Nothing listens on port 1 of the loopback address.
    let down = "amqp://guest:guest@127.0.0.1:1/%2f";
    let driver = RabbitMqDriver::new(down, &queue, RabbitMqOptions::default())
        .unwrap()
        .with_fallback_urls([amqp_url()]);
    let m = Message::new("t");
    driver.send(&m, DEFAULT_PRIORITY).await.unwrap();
    let d = driver
        .receive(&[], Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.message().id(), m.id());
    driver.ack(&d).await.unwrap();

    let none_up = RabbitMqDriver::new(down, &queue, RabbitMqOptions::default())
        .unwrap()
        .with_fallback_urls(["amqp://guest:guest@127.0.0.1:2/%2f"]);
    let err = none_up
        .send(&Message::new("t"), DEFAULT_PRIORITY)
        .await
        .unwrap_err();
    assert!(err.is_temporary(), "{err}");
    CLASSIC.cleanup(&queue).await;
}
