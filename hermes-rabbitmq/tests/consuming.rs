//! How the RabbitMQ driver consumes: prefetch, consumer tags, giving back on flush, priority
//! with a backlog, and rejecting undecodable bodies to a dead-letter policy.

mod common;

use std::time::Duration;

use common::{CLASSIC, amqp_url, rabbitmqctl, ready, take_raw};
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, Message};
use hermes_rabbitmq::{RabbitMqDriver, RabbitMqOptions, UndecodableAction};
use hermes_testkit::suite::{Harness, available_or_skip, strict, unique_queue_name};
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;

const HIGH: i32 = DEFAULT_PRIORITY + 100;
const LOW: i32 = DEFAULT_PRIORITY - 50;
const WAIT: Duration = Duration::from_secs(5);

fn driver(queue: &str, prefetch: u16) -> RabbitMqDriver {
    let mut options = RabbitMqOptions::default();
    options.prefetch = prefetch;
    RabbitMqDriver::new(&amqp_url(), queue, options).unwrap()
}

async fn send_many(driver: &RabbitMqDriver, n: usize, priority: i32) {
    for i in 0..n {
        let m = Message::builder("t").id(format!("m{i}")).build().unwrap();
        driver.send(&m, priority).await.unwrap();
    }
}

/// Waits until `queue` has `expected` ready messages; returns the last count seen.
async fn settle_ready(queue: &str, expected: u32) -> u32 {
    let mut seen = ready(queue).await;
    for _ in 0..50 {
        if seen == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen = ready(queue).await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_sends_ahead_only_the_prefetch_and_flush_gives_it_back() {
    if !available_or_skip(
        strict(),
        "the_broker_sends_ahead_only_the_prefetch_and_flush_gives_it_back",
        CLASSIC.available().await,
    ) {
        return;
    }
    for prefetch in [1u16, 3] {
        let queue = unique_queue_name("prefetch");
        let worker = driver(&queue, prefetch);
        send_many(&worker, 6, DEFAULT_PRIORITY).await;
        let d = worker.receive(&[], WAIT).await.unwrap().unwrap();
        // The rest of the prefetch is held by this worker; the others wait on the broker.
        assert_eq!(
            settle_ready(&queue, 6 - u32::from(prefetch)).await,
            6 - u32::from(prefetch)
        );
        worker.ack(&d).await.unwrap();
        worker.flush().await.unwrap();
        // Flushing stops the consumer and gives back what it held: 5 left, all on the broker.
        assert_eq!(settle_ready(&queue, 5).await, 5, "prefetch {prefetch}");
        // A later receive consumes again.
        let d = worker.receive(&[], WAIT).await.unwrap().unwrap();
        worker.ack(&d).await.unwrap();
        worker.flush().await.unwrap();
        assert_eq!(settle_ready(&queue, 4).await, 4);
        CLASSIC.cleanup(&queue).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_carry_the_consumer_tag() {
    if !available_or_skip(
        strict(),
        "consumers_carry_the_consumer_tag",
        CLASSIC.available().await,
    ) {
        return;
    }
    let queue = unique_queue_name("tag");
    let high = format!("{queue}-high");
    let mut options = RabbitMqOptions::default();
    options.consumer_tag = "billing-worker".to_owned();
    let worker = RabbitMqDriver::new(&amqp_url(), &queue, options).unwrap();
    worker.setup_priority_queue(&high, 10).unwrap();
    assert!(
        worker
            .receive(&[], Duration::from_millis(100))
            .await
            .unwrap()
            .is_none()
    );
    let listed = rabbitmqctl(&["-q", "list_consumers", "queue_name", "consumer_tag"]);
    let ours: Vec<&str> = listed.lines().filter(|l| l.starts_with(&queue)).collect();
    assert!(
        ours.contains(&format!("{queue}\tbilling-worker").as_str()),
        "{listed}"
    );
    assert!(
        ours.contains(&format!("{high}\tbilling-worker.{high}").as_str()),
        "{listed}"
    );
    worker.flush().await.unwrap();
    CLASSIC.cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_on_every_priority_is_taken_highest_first() {
    if !available_or_skip(
        strict(),
        "a_backlog_on_every_priority_is_taken_highest_first",
        CLASSIC.available().await,
    ) {
        return;
    }
    let queue = unique_queue_name("backlog");
    let emitter = driver(&queue, 1);
    emitter
        .setup_priority_queue(&format!("{queue}-high"), HIGH)
        .unwrap();
    emitter
        .setup_priority_queue(&format!("{queue}-low"), LOW)
        .unwrap();
    for priority in [LOW, DEFAULT_PRIORITY, HIGH] {
        send_many(&emitter, 3, priority).await;
    }
    let worker = driver(&queue, 4);
    worker
        .setup_priority_queue(&format!("{queue}-high"), HIGH)
        .unwrap();
    worker
        .setup_priority_queue(&format!("{queue}-low"), LOW)
        .unwrap();
    let mut order = Vec::new();
    for _ in 0..9 {
        let d = worker.receive(&[], WAIT).await.unwrap().unwrap();
        order.push(d.priority());
        worker.ack(&d).await.unwrap();
    }
    let d = DEFAULT_PRIORITY;
    assert_eq!(order, [HIGH, HIGH, HIGH, d, d, d, LOW, LOW, LOW]);
    CLASSIC.cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_body_is_rejected_to_the_dead_letter_policy() {
    if !available_or_skip(
        strict(),
        "an_undecodable_body_is_rejected_to_the_dead_letter_policy",
        CLASSIC.available().await,
    ) {
        return;
    }
    // Rejected only, and (the default) quarantined first: the policy gets it either way.
    for (action, quarantined) in [
        (UndecodableAction::Reject, 0),
        (UndecodableAction::Quarantine, 1),
    ] {
        let queue = unique_queue_name("reject");
        let dead = format!("{queue}.dead");
        let policy = format!("{queue}-dlx");
        let definition =
            format!(r#"{{"dead-letter-exchange":"","dead-letter-routing-key":"{dead}"}}"#);
        let _ = rabbitmqctl(&[
            "set_policy",
            &policy,
            &format!("^{queue}$"),
            &definition,
            "--apply-to",
            "queues",
        ]);
        let connection = common::raw().await.unwrap();
        let channel = connection.create_channel().await.unwrap();
        let durable = QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        };
        channel
            .queue_declare(dead.as_str().into(), durable, FieldTable::default())
            .await
            .unwrap();
        CLASSIC.push_raw(&queue, b"not json").await.unwrap();

        let mut options = RabbitMqOptions::default();
        options.undecodable = action;
        let worker = RabbitMqDriver::new(&amqp_url(), &queue, options).unwrap();
        let err = worker.receive(&[], WAIT).await.unwrap_err();
        assert!(matches!(err, Error::Undecodable { .. }), "{err}");
        // Not requeued.
        let next = worker.receive(&[], Duration::from_millis(300)).await;
        assert!(next.unwrap().is_none(), "{action:?}");
        assert_eq!(
            CLASSIC.quarantined(&queue).await.unwrap(),
            quarantined,
            "{action:?}"
        );
        let (body, _) = take_raw(&dead).await.expect("the body was dead-lettered");
        assert_eq!(body, b"not json");

        let _ = rabbitmqctl(&["clear_policy", &policy]);
        let _ = channel
            .queue_delete(dead.as_str().into(), Default::default())
            .await;
        let _ = connection.close(200, "bye".into()).await;
        CLASSIC.cleanup(&queue).await;
    }
}
