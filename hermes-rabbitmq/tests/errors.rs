//! Errors that must not be retried as lost connections, and secrets that must not show.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::amqp_url;
use hermes_core::{DEFAULT_PRIORITY, Dispatcher, Driver, Error, Message};
use hermes_rabbitmq::{RabbitMqDriver, RabbitMqOptions};
use hermes_testkit::suite::unique_queue_name;

/// The test broker's URL with another password.
fn with_password(password: &str) -> String {
    let url = amqp_url();
    let (scheme, rest) = url.split_once("://").unwrap();
    let (userinfo, host) = rest.split_once('@').unwrap();
    let user = userinfo.split(':').next().unwrap();
    format!("{scheme}://{user}:{password}@{host}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_permanent_and_stops_a_worker_at_once() {
    let queue = unique_queue_name("access");
    let driver = RabbitMqDriver::new(
        &with_password("wrong-pass-123"),
        &queue,
        RabbitMqOptions::default(),
    )
    .unwrap();
    let started = Instant::now();
    let err = driver
        .send(&Message::new("t"), DEFAULT_PRIORITY)
        .await
        .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(!err.is_temporary(), "retried as a lost connection: {text}");
    assert!(matches!(err, Error::Config { .. }), "{text}");
    assert!(
        text.contains("ACCESS_REFUSED") || text.contains("refused access"),
        "{text}"
    );
    assert!(!text.contains("wrong-pass-123"), "{text}");
    // A worker does not retry it for minutes: it exits with the error.
    let dispatcher = Dispatcher::from_arc(Arc::new(driver));
    let result = tokio::time::timeout(Duration::from_secs(10), dispatcher.handle(&[]))
        .await
        .expect("the worker retried a refused login");
    assert!(result.is_err_and(|e| !e.is_temporary()));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_options_the_broker_would_refuse_or_misuse_fail_before_any_call() {
    // Nothing listens on port 1: a refusal proves no call was made.
    let url = "amqp://guest:guest@127.0.0.1:1/%2f";
    let err = RabbitMqDriver::new(url, "amq.hermes", RabbitMqOptions::default()).unwrap_err();
    assert!(matches!(err, Error::InvalidQueueName { .. }), "{err}");
    assert!(err.to_string().contains("amq."), "{err}");
    let driver = RabbitMqDriver::new(url, "hermes", RabbitMqOptions::default()).unwrap();
    let err = driver
        .setup_priority_queue("amq.gen-high", 200)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidQueueName { .. }), "{err}");
    // A per-message TTL would let delayed messages out of the ladder early.
    let mut options = RabbitMqOptions::default();
    options.properties = lapin::BasicProperties::default().with_expiration("1000".into());
    let err = RabbitMqDriver::new(url, "hermes", options).unwrap_err();
    assert!(
        matches!(err, Error::Config { .. }) && err.to_string().contains("expiration"),
        "{err}"
    );
    // A long name is cut in the error.
    let err = RabbitMqDriver::new(url, &"q".repeat(10_000), RabbitMqOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.len() < 300, "{} bytes", err.len());
}

#[test]
fn the_password_shows_neither_in_the_drivers_debug_nor_in_the_dispatchers() {
    let url = with_password("hidden-secret-42");
    let driver = RabbitMqDriver::new(&url, "hermes", RabbitMqOptions::default()).unwrap();
    let shown = format!("{driver:?}");
    assert!(!shown.contains("hidden-secret-42"), "{shown}");
    assert!(shown.contains("***"), "{shown}");
    let dispatcher = Dispatcher::new(driver);
    let shown = format!("{dispatcher:?}");
    assert!(!shown.contains("hidden-secret-42"), "{shown}");
}

#[test]
fn a_url_is_read_and_its_mistakes_named_without_the_password() {
    let driver = RabbitMqDriver::from_url(
        "amqps://user:p%40ss@broker.example:5671/jobs?queue=exports&prefetch=16&durable=false",
    )
    .unwrap();
    assert_eq!(driver.quarantine_queue(), "exports.quarantine");
    let shown = format!("{driver:?}");
    assert!(
        shown.contains("amqps://user:***@broker.example:5671/jobs"),
        "{shown}"
    );
    assert!(
        !shown.contains("p%40ss") && !shown.contains("queue="),
        "{shown}"
    );
    let quorum = RabbitMqDriver::from_url(
        "amqp://u:secret-pw@a:5681/%2f?queue_type=quorum&fallback=b:5682,%20c:5683",
    )
    .unwrap();
    let shown = format!("{quorum:?}");
    assert!(
        shown.contains(
            r#"["amqp://u:***@a:5681/%2f", "amqp://u:***@b:5682/%2f", "amqp://u:***@c:5683/%2f"]"#
        ),
        "{shown}"
    );

    for (url, says) in [
        ("redis://:secret-pw@x", "amqp://"),
        ("amqp://:secret-pw@/%2f", "host"),
        ("amqp://u:secret-pw@h/%2f?colour=red", "unknown parameter"),
        ("amqp://u:secret-pw@h/%2f?prefetch=0", "prefetch"),
        ("amqp://u:secret-pw@h/%2f?prefetch=70000", "prefetch"),
        ("amqp://u:secret-pw@h/%2f?durable=yes", "true or false"),
        (
            "amqp://u:secret-pw@h/%2f?queue_type=stream",
            "classic or quorum",
        ),
        (
            "amqp://u:secret-pw@h/%2f?queue_type=quorum&durable=false",
            "durable",
        ),
        (
            "amqp://u:secret-pw@h/%2f?undecodable=drop",
            "quarantine or reject",
        ),
        ("amqp://u:secret-pw@h/%2f?refresh_interval=-1", "seconds"),
        (
            "amqp://u:secret-pw@h/%2f?retention_count=many",
            "whole number",
        ),
        ("amqp://u:secret-pw@h/%2f?queue=amq.x", "amq."),
        ("amqp://u:secret-pw@h/%2f?queue=..%2fup", "queue"),
    ] {
        let err = RabbitMqDriver::from_url(url).unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(text.contains(says), "{url}: {text}");
        assert!(!text.contains("secret-pw"), "{url}: {text}");
    }
}
