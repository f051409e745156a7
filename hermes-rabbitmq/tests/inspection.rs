//! Inspection and dead letters on RabbitMQ, beyond the conformance scenarios: the headers of a
//! dead letter, retention by count (also on a quarantine an earlier version declared without
//! arguments) and by age, the plain Hermes JSON a PHP consumer still reads after a replay, the
//! exact bytes of a replayed undecodable body, the priorities' dead letters kept apart,
//! listings that move nothing, and replays that run at once without duplicates.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{CLASSIC, amqp_url, declare_durable, publish_raw, raw, ready, take_raw};
use hermes_core::driver::Delivery;
use hermes_core::inspect::{DeadKind, DeadReason, Figure, QueueState, Replay};
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, JsonSerializer, Message, Serializer};
use hermes_rabbitmq::{
    DEAD_AT, DEAD_ERROR, DEAD_HANDLER, DEAD_ID, DEAD_KIND, DEAD_RETRIES, PRIORITY, RabbitMqDriver,
    RabbitMqOptions, quarantine_queue,
};
use hermes_testkit::suite::{Harness, available_or_skip, strict, unique_queue_name};
use lapin::types::AMQPValue;

const WAIT: Duration = Duration::from_secs(5);
const HIGH: i32 = DEFAULT_PRIORITY + 100;

async fn up(test: &str) -> bool {
    available_or_skip(strict(), test, CLASSIC.available().await)
}

fn driver_with(queue: &str, tune: impl FnOnce(&mut RabbitMqOptions)) -> RabbitMqDriver {
    let mut options = RabbitMqOptions::default();
    options.prefetch = 10;
    options.refresh_interval = Duration::from_millis(20);
    tune(&mut options);
    RabbitMqDriver::new(&amqp_url(), queue, options).unwrap()
}

async fn claim(driver: &RabbitMqDriver) -> Delivery {
    driver
        .receive(&[], WAIT)
        .await
        .expect("receive")
        .expect("a message")
}

fn failed(error: &str) -> DeadReason {
    DeadReason::new(DeadKind::Failed, error).with_handler("Archiver")
}

/// Sends `n` messages `<prefix>-<i>` and dead-letters each, in order.
async fn bury(driver: &RabbitMqDriver, prefix: &str, n: usize) {
    for i in 0..n {
        let m = Message::builder("doomed")
            .id(format!("{prefix}-{i}"))
            .build()
            .unwrap();
        driver.send(&m, DEFAULT_PRIORITY).await.unwrap();
        let d = claim(driver).await;
        assert_eq!(d.message().id(), m.id());
        driver
            .dead_letters()
            .unwrap()
            .add(&d, &failed("boom"))
            .await
            .unwrap();
    }
}

async fn listed_ids(driver: &RabbitMqDriver, priority: i32) -> Vec<String> {
    driver
        .dead_letters()
        .unwrap()
        .list(priority, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.id)
        .collect()
}

fn header<'a>(properties: &'a lapin::BasicProperties, name: &str) -> &'a AMQPValue {
    properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get(name))
        .unwrap_or_else(|| panic!("no header {name}"))
}

fn text(value: &AMQPValue) -> String {
    match value {
        AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        other => panic!("not text: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_is_the_delivered_body_with_its_reason_in_headers() {
    if !up("a_dead_letter_is_the_delivered_body_with_its_reason_in_headers").await {
        return;
    }
    let queue = unique_queue_name("dead-headers");
    let driver = driver_with(&queue, |_| {});
    // PHP's bytes, with spacing Hermes' own encoder would not write: kept byte for byte.
    let php = br#"{"message": {"id": "php-1", "type": "export", "created": 1700000000.5, "payload": {"a": 1}, "execute_at": null, "retries": 3}}"#;
    CLASSIC.push_raw(&queue, php).await.unwrap();
    let d = claim(&driver).await;
    let reason = failed("the disk is full").with_retries(3);
    driver
        .dead_letters()
        .unwrap()
        .add(&d, &reason)
        .await
        .unwrap();
    assert_eq!(ready(&queue).await, 0, "acknowledged on its queue");

    let (body, properties) = take_raw(&quarantine_queue(&queue))
        .await
        .expect("a dead letter");
    assert_eq!(body, php, "the body as it was delivered");
    assert_eq!(text(header(&properties, DEAD_ID)), "php-1");
    assert_eq!(text(header(&properties, DEAD_KIND)), "failed");
    assert_eq!(text(header(&properties, DEAD_ERROR)), "the disk is full");
    assert_eq!(text(header(&properties, DEAD_HANDLER)), "Archiver");
    assert_eq!(header(&properties, DEAD_AT), &AMQPValue::Double(reason.at));
    assert_eq!(
        header(&properties, DEAD_RETRIES),
        &AMQPValue::LongLongInt(3)
    );
    assert_eq!(
        header(&properties, PRIORITY),
        &AMQPValue::LongLongInt(i64::from(DEFAULT_PRIORITY))
    );
    assert_eq!(properties.delivery_mode(), &Some(2), "persistent");
    CLASSIC.cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_by_count_drops_the_oldest_also_on_an_old_quarantine() {
    if !up("retention_by_count_drops_the_oldest_also_on_an_old_quarantine").await {
        return;
    }
    for declared_before in [false, true] {
        let queue = unique_queue_name("dead-count");
        if declared_before {
            // A quarantine as an earlier version declared it: durable, without arguments.
            let connection = raw().await.unwrap();
            let channel = connection.create_channel().await.unwrap();
            declare_durable(&channel, &quarantine_queue(&queue)).await;
            let _ = connection.close(200, "bye".into()).await;
        }
        let driver = driver_with(&queue, |o| o.retention.max_count = 3);
        bury(&driver, "m", 5).await;
        assert_eq!(
            listed_ids(&driver, DEFAULT_PRIORITY).await,
            ["m-2", "m-3", "m-4"],
            "the newest three, oldest first (declared before: {declared_before})"
        );
        assert_eq!(ready(&quarantine_queue(&queue)).await, 3);
        CLASSIC.cleanup(&queue).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_by_age_drops_old_letters_when_listed_or_added() {
    if !up("retention_by_age_drops_old_letters_when_listed_or_added").await {
        return;
    }
    let queue = unique_queue_name("dead-age");
    let driver = driver_with(&queue, |o| o.retention.max_age = Duration::from_secs(1));
    bury(&driver, "old", 2).await;
    assert_eq!(listed_ids(&driver, DEFAULT_PRIORITY).await.len(), 2);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // An addition drops the old ones at the head.
    bury(&driver, "new", 1).await;
    assert_eq!(ready(&quarantine_queue(&queue)).await, 1);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // So does a listing.
    assert!(listed_ids(&driver, DEFAULT_PRIORITY).await.is_empty());
    assert_eq!(ready(&quarantine_queue(&queue)).await, 0);
    CLASSIC.cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_php_consumer_reads_plain_hermes_json_after_a_replay() {
    if !up("a_php_consumer_reads_plain_hermes_json_after_a_replay").await {
        return;
    }
    let queue = unique_queue_name("dead-php");
    let driver = driver_with(&queue, |_| {});
    let m = Message::builder("export")
        .id("replayed-1")
        .payload(&serde_json::json!({"report": "sales"}))
        .retries(4)
        .build()
        .unwrap();
    driver.send(&m, DEFAULT_PRIORITY).await.unwrap();
    let d = claim(&driver).await;
    driver
        .dead_letters()
        .unwrap()
        .add(&d, &failed("boom"))
        .await
        .unwrap();
    driver.flush().await.unwrap();
    let replayed = driver
        .dead_letters()
        .unwrap()
        .replay(DEFAULT_PRIORITY, &Replay::all())
        .await
        .unwrap();
    assert_eq!(replayed, 1);
    let (body, properties) = take_raw(&queue).await.expect("the replayed message");
    let expected = JsonSerializer.serialize(&m.replay_copy(false)).unwrap();
    assert_eq!(body, expected, "Hermes' JSON, retries reset, nothing more");
    assert!(
        properties.headers().as_ref().is_none_or(|h| h
            .inner()
            .keys()
            .all(|k| !k.as_str().starts_with("x-hermes"))),
        "no dead-letter headers on the main queue: {properties:?}"
    );
    assert_eq!(
        ready(&quarantine_queue(&queue)).await,
        0,
        "replayed, so gone"
    );
    CLASSIC.cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_body_replays_as_its_exact_bytes() {
    if !up("an_undecodable_body_replays_as_its_exact_bytes").await {
        return;
    }
    let queue = unique_queue_name("dead-bytes");
    let driver = driver_with(&queue, |_| {});
    let garbage: &[u8] = b"\xff\x00{\"message\": secret-token \xfe";
    CLASSIC.push_raw(&queue, garbage).await.unwrap();
    let err = driver.receive(&[], WAIT).await.unwrap_err();
    assert!(matches!(err, Error::Undecodable { .. }), "{err}");
    driver.flush().await.unwrap();

    let letters = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 10)
        .await
        .unwrap();
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    assert_eq!(letter.reason.kind, DeadKind::Undecodable);
    assert!(letter.message.is_none());
    assert!(letter.reason.handler.is_none());
    assert!(
        !letter.reason.error.contains("secret-token"),
        "no input in the reason"
    );
    assert!((letter.reason.at - hermes_core::time::unix_now()).abs() < 60.0);
    assert_eq!(
        listed_ids(&driver, DEFAULT_PRIORITY).await,
        std::slice::from_ref(&letter.id),
        "a stable id"
    );

    let replayed = driver
        .dead_letters()
        .unwrap()
        .replay(DEFAULT_PRIORITY, &Replay::ids([letter.id.clone()]))
        .await
        .unwrap();
    assert_eq!(replayed, 1);
    let (body, _) = take_raw(&queue).await.expect("the bytes back on the queue");
    assert_eq!(body, garbage);
    assert_eq!(ready(&quarantine_queue(&queue)).await, 0);
    CLASSIC.cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_quarantined_by_an_earlier_version_lists_and_replays() {
    if !up("a_body_quarantined_by_an_earlier_version_lists_and_replays").await {
        return;
    }
    let queue = unique_queue_name("dead-legacy");
    let driver = driver_with(&queue, |_| {});
    // What an earlier version left: the body alone, without headers.
    let connection = raw().await.unwrap();
    let channel = connection.create_channel().await.unwrap();
    declare_durable(&channel, &quarantine_queue(&queue)).await;
    declare_durable(&channel, &queue).await;
    let _ = connection.close(200, "bye".into()).await;
    publish_raw(&quarantine_queue(&queue), b"not json at all").await;

    let letters = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 10)
        .await
        .unwrap();
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].reason.kind, DeadKind::Undecodable);
    assert!(
        letters[0].id.starts_with("undecodable-"),
        "{}",
        letters[0].id
    );
    assert_eq!(
        listed_ids(&driver, DEFAULT_PRIORITY).await,
        [letters[0].id.clone()]
    );
    let replayed = driver
        .dead_letters()
        .unwrap()
        .replay(DEFAULT_PRIORITY, &Replay::ids([letters[0].id.clone()]))
        .await
        .unwrap();
    assert_eq!(replayed, 1);
    assert_eq!(take_raw(&queue).await.unwrap().0, b"not json at all");
    CLASSIC.cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dead_letters_of_two_priorities_are_kept_apart() {
    if !up("the_dead_letters_of_two_priorities_are_kept_apart").await {
        return;
    }
    let queue = unique_queue_name("dead-apart");
    let high = format!("{queue}-high");
    let driver = driver_with(&queue, |_| {});
    driver.setup_priority_queue(&high, HIGH).unwrap();
    for (id, priority) in [("low-1", DEFAULT_PRIORITY), ("high-1", HIGH)] {
        let m = Message::builder("doomed").id(id).build().unwrap();
        driver.send(&m, priority).await.unwrap();
        let d = driver.receive(&[priority], WAIT).await.unwrap().unwrap();
        assert_eq!(d.priority(), priority);
        driver
            .dead_letters()
            .unwrap()
            .add(&d, &failed("boom"))
            .await
            .unwrap();
    }
    assert_eq!(listed_ids(&driver, DEFAULT_PRIORITY).await, ["low-1"]);
    assert_eq!(listed_ids(&driver, HIGH).await, ["high-1"]);
    let high_letter = &driver.dead_letters().unwrap().list(HIGH, 1).await.unwrap()[0];
    assert_eq!(high_letter.priority, HIGH);
    assert_eq!(ready(&quarantine_queue(&high)).await, 1);

    let stats = driver.inspect().unwrap().stats().await.unwrap();
    let names: Vec<&str> = stats.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, [high.as_str(), queue.as_str()], "highest first");
    for s in &stats {
        assert_eq!(s.dead, Figure::Exact(1), "{s:?}");
        assert_eq!(s.waiting, Figure::Approximate(0), "{s:?}");
        assert_eq!(s.in_flight, Figure::Unknown);
        assert_eq!(s.latency, Figure::Unknown);
    }

    assert_eq!(
        driver
            .inspect()
            .unwrap()
            .purge(HIGH, QueueState::Dead)
            .await
            .unwrap(),
        Some(1)
    );
    assert!(listed_ids(&driver, HIGH).await.is_empty());
    assert_eq!(listed_ids(&driver, DEFAULT_PRIORITY).await, ["low-1"]);
    assert_eq!(
        driver
            .dead_letters()
            .unwrap()
            .replay(HIGH, &Replay::all())
            .await
            .unwrap(),
        0,
        "nothing of the other priority is replayed"
    );
    let err = driver
        .inspect()
        .unwrap()
        .purge(DEFAULT_PRIORITY, QueueState::InFlight)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    CLASSIC.cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_moves_nothing_and_keeps_the_order() {
    if !up("a_listing_moves_nothing_and_keeps_the_order").await {
        return;
    }
    let queue = unique_queue_name("dead-list");
    let driver = driver_with(&queue, |_| {});
    bury(&driver, "m", 4).await;
    assert_eq!(
        driver
            .dead_letters()
            .unwrap()
            .list(DEFAULT_PRIORITY, 2)
            .await
            .unwrap()
            .iter()
            .map(|l| l.id.as_str())
            .collect::<Vec<_>>(),
        ["m-0", "m-1"],
        "the limit, oldest first"
    );
    let expected = ["m-0", "m-1", "m-2", "m-3"];
    assert_eq!(listed_ids(&driver, DEFAULT_PRIORITY).await, expected);
    // Replaying one from the middle leaves the others in their order.
    assert_eq!(
        driver
            .dead_letters()
            .unwrap()
            .replay(DEFAULT_PRIORITY, &Replay::ids(["m-1"]))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        listed_ids(&driver, DEFAULT_PRIORITY).await,
        ["m-0", "m-2", "m-3"]
    );
    assert_eq!(ready(&quarantine_queue(&queue)).await, 3);
    CLASSIC.cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replays_at_once_put_each_letter_back_once() {
    if !up("two_replays_at_once_put_each_letter_back_once").await {
        return;
    }
    let queue = unique_queue_name("dead-twice");
    let driver = driver_with(&queue, |_| {});
    bury(&driver, "m", 30).await;
    driver.flush().await.unwrap();
    let (a, b) = (driver_with(&queue, |_| {}), driver_with(&queue, |_| {}));
    let all = Replay::all();
    let (ra, rb) = tokio::join!(
        a.dead_letters().unwrap().replay(DEFAULT_PRIORITY, &all),
        b.dead_letters().unwrap().replay(DEFAULT_PRIORITY, &all)
    );
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    // A letter the other replay holds is invisible to this one, so it may see fewer: what
    // one did not replay, the other did, or it is still dead.
    let left = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 100)
        .await
        .unwrap()
        .len() as u64;
    assert_eq!(ra + rb + left, 30, "{ra} + {rb} + {left}");
    let mut seen = HashSet::new();
    while let Some((body, _)) = take_raw(&queue).await {
        let m = JsonSerializer.deserialize(&body).unwrap();
        assert!(seen.insert(m.id().to_owned()), "{} replayed twice", m.id());
    }
    assert_eq!(seen.len() as u64, ra + rb);
    CLASSIC.cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_and_purges_of_delayed_messages_use_the_delay_queues() {
    if !up("stats_and_purges_of_delayed_messages_use_the_delay_queues").await {
        return;
    }
    let queue = unique_queue_name("stats-delayed");
    let driver = driver_with(&queue, |_| {});
    // Not declared yet: every count is 0.
    let empty = driver.inspect().unwrap().stats().await.unwrap();
    assert_eq!(empty[0].waiting, Figure::Approximate(0));
    assert_eq!(empty[0].delayed, Figure::Approximate(0));
    assert_eq!(empty[0].dead, Figure::Exact(0));
    for (n, delay) in [(0, 0u64), (1, 0), (2, 30), (3, 3600), (4, 90 * 24 * 3600)] {
        let m = Message::builder("later")
            .id(format!("m{n}"))
            .delay(Duration::from_secs(delay))
            .build()
            .unwrap();
        driver.send(&m, DEFAULT_PRIORITY).await.unwrap();
    }
    let stats = driver.inspect().unwrap().stats().await.unwrap();
    assert_eq!(stats[0].waiting, Figure::Approximate(2));
    assert_eq!(stats[0].delayed, Figure::Approximate(3));
    assert_eq!(
        driver
            .inspect()
            .unwrap()
            .purge(DEFAULT_PRIORITY, QueueState::Delayed)
            .await
            .unwrap(),
        Some(3)
    );
    let stats = driver.inspect().unwrap().stats().await.unwrap();
    assert_eq!(
        stats[0].waiting,
        Figure::Approximate(2),
        "the waiting ones stay"
    );
    assert_eq!(stats[0].delayed, Figure::Approximate(0));
    assert_eq!(
        driver
            .inspect()
            .unwrap()
            .purge(DEFAULT_PRIORITY, QueueState::Waiting)
            .await
            .unwrap(),
        Some(2)
    );
    assert_eq!(ready(&queue).await, 0);
    CLASSIC.cleanup(&queue).await;
}
