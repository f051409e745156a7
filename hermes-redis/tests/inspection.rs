//! The Redis driver's inspection beyond the conformance suite: where dead letters live, their
//! retention, figures of priority queues and of messages PHP scheduled, the latency bound, and
//! the URL constructor against the real server.

mod common;

use std::time::Duration;

use common::{Setup, cmd, redis_url};
use hermes_core::inspect::{DeadKind, DeadReason, Figure, QueueState, Replay, Retention};
use hermes_core::{DEFAULT_PRIORITY, Driver, JsonSerializer, Message, Serializer};
use hermes_redis::{LATENCY_SCAN_LIMIT, RedisSetDriver};
use hermes_testkit::suite::unique_queue_name;

const HIGH: i32 = 200;

async fn cleanup(queue: &str) {
    for suffix in [
        "",
        "_schedule",
        "_schedule_by_priority",
        "_schedule_priorities",
        "_in_flight",
        "_dead",
        "_dead_letters",
        "_high",
        "_high_dead",
        "_high_dead_letters",
    ] {
        let key = format!("{queue}{suffix}");
        cmd::<i64>(&[b"DEL", key.as_bytes()]).await;
    }
}

async fn open(queue: &str, retention: Retention) -> RedisSetDriver {
    let mut options = Setup::REDIS_RS.options(queue);
    options.retention = retention;
    let driver = Setup::REDIS_RS.connect(options).await.expect("Redis");
    driver
        .setup_priority_queue(&format!("{queue}_high"), HIGH)
        .unwrap();
    driver
}

fn message(n: u32) -> Message {
    Message::builder("inspected")
        .id(format!("m-{n}"))
        .payload(&serde_json::json!({ "n": n }))
        .build()
        .unwrap()
}

/// Receives and dead-letters one message of `priority`.
async fn bury_one(driver: &RedisSetDriver, priority: i32, error: &str) -> String {
    let delivery = driver
        .receive(&[priority], Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a message");
    let reason = DeadReason::new(DeadKind::Failed, error).with_handler("Test");
    driver
        .dead_letters()
        .unwrap()
        .add(&delivery, &reason)
        .await
        .unwrap();
    delivery.message().id().to_owned()
}

/// Dead letters live beside their own queue's set, apart from the other priority's; a replay
/// puts Hermes' plain JSON back in the set, which a PHP worker reads as any message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_of_two_priorities_are_kept_apart_and_replay_as_hermes_json() {
    let queue = unique_queue_name("dead-apart");
    let driver = open(&queue, Retention::default()).await;
    driver.send(&message(1), DEFAULT_PRIORITY).await.unwrap();
    driver.send(&message(2), HIGH).await.unwrap();
    assert_eq!(bury_one(&driver, HIGH, "high failed").await, "m-2");
    assert_eq!(
        bury_one(&driver, DEFAULT_PRIORITY, "low failed").await,
        "m-1"
    );

    assert_eq!(
        driver.dead_letter_keys(HIGH).unwrap(),
        (
            format!("{queue}_high_dead"),
            format!("{queue}_high_dead_letters")
        )
    );
    let ids: Vec<String> = cmd(&[
        b"ZRANGE",
        format!("{queue}_high_dead").as_bytes(),
        b"0",
        b"-1",
    ])
    .await;
    assert_eq!(ids, ["m-2"]);
    let high = driver.dead_letters().unwrap().list(HIGH, 10).await.unwrap();
    assert_eq!(high.len(), 1);
    assert_eq!(high[0].reason.error, "high failed");
    assert_eq!(high[0].priority, HIGH);
    let low = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 10)
        .await
        .unwrap();
    assert_eq!(
        low.iter().map(|l| l.id.as_str()).collect::<Vec<_>>(),
        ["m-1"]
    );
    let stats = driver.inspect().unwrap().stats().await.unwrap();
    assert_eq!(stats[0].priority, HIGH, "highest priority first");
    assert_eq!(stats[0].dead, Figure::Exact(1));
    assert_eq!(stats[1].dead, Figure::Exact(1));

    assert_eq!(
        driver
            .dead_letters()
            .unwrap()
            .replay(HIGH, &Replay::all())
            .await
            .unwrap(),
        1
    );
    let members: Vec<Vec<u8>> = cmd(&[b"SMEMBERS", format!("{queue}_high").as_bytes()]).await;
    assert_eq!(members.len(), 1);
    let back = JsonSerializer
        .deserialize(&members[0])
        .expect("Hermes JSON");
    assert_eq!(back.id(), "m-2");
    assert_eq!(back.payload(), message(2).payload());
    assert_eq!((back.retries(), back.execute_at()), (0, None));
    assert_eq!(
        driver
            .dead_letters()
            .unwrap()
            .list(DEFAULT_PRIORITY, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        driver
            .dead_letters()
            .unwrap()
            .replay(HIGH, &Replay::all())
            .await
            .unwrap(),
        0,
        "gone once replayed"
    );
    cleanup(&queue).await;
}

/// The store keeps at most `max_count` dead letters per queue, dropping the oldest, and none
/// older than `max_age`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_drops_the_oldest_by_count_and_by_age() {
    let queue = unique_queue_name("dead-retention");
    let mut retention = Retention::default();
    retention.max_count = 2;
    let driver = open(&queue, retention).await;
    for n in 0..3 {
        driver.send(&message(n), DEFAULT_PRIORITY).await.unwrap();
        bury_one(&driver, DEFAULT_PRIORITY, "failed").await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let kept = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 10)
        .await
        .unwrap();
    assert_eq!(kept.len(), 2);
    assert!(kept.iter().all(|l| l.id != "m-0"), "the oldest went");
    let records: i64 = cmd(&[b"HLEN", format!("{queue}_dead_letters").as_bytes()]).await;
    assert_eq!(records, 2, "its record went with it");

    let mut retention = Retention::default();
    retention.max_age = Duration::from_millis(300);
    let driver = open(&queue, retention).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    driver.send(&message(9), DEFAULT_PRIORITY).await.unwrap();
    bury_one(&driver, DEFAULT_PRIORITY, "failed").await;
    let kept = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 10)
        .await
        .unwrap();
    assert_eq!(
        kept.iter().map(|l| l.id.as_str()).collect::<Vec<_>>(),
        ["m-9"]
    );
    cleanup(&queue).await;
}

/// A delayed message of a priority queue counts for that queue; one PHP scheduled (no
/// priority recorded) and one already due count for the default queue, as the claim script
/// promotes them; purging the high queue's delayed messages leaves the default's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_messages_count_for_the_queue_they_will_reach() {
    let queue = unique_queue_name("stats-schedule");
    let driver = open(&queue, Retention::default()).await;
    let later = |n| {
        Message::builder("inspected")
            .id(format!("later-{n}"))
            .delay(Duration::from_secs(600))
            .build()
            .unwrap()
    };
    driver.send(&later(1), HIGH).await.unwrap();
    driver.send(&later(2), HIGH).await.unwrap();
    let now = hermes_core::time::unix_now();
    let php = JsonSerializer.serialize(&later(3)).unwrap();
    let schedule = format!("{queue}_schedule");
    let at = (now + 600.0).to_string();
    cmd::<i64>(&[b"ZADD", schedule.as_bytes(), at.as_bytes(), &php]).await;
    let due = message(4);
    let due_body = JsonSerializer.serialize(&due).unwrap();
    let past = (now - 5.0).to_string();
    cmd::<i64>(&[b"ZADD", schedule.as_bytes(), past.as_bytes(), &due_body]).await;

    let stats = driver.inspect().unwrap().stats().await.unwrap();
    let (high, default) = (&stats[0], &stats[1]);
    assert_eq!(high.delayed, Figure::Exact(2));
    assert_eq!(high.waiting, Figure::Exact(0));
    assert_eq!(default.delayed, Figure::Exact(1));
    assert_eq!(default.waiting, Figure::Exact(1), "due, not yet promoted");
    let Figure::Exact(latency) = default.latency else {
        panic!("{:?}", default.latency)
    };
    assert!(latency >= Duration::from_secs(5), "{latency:?}");
    let peeked = driver
        .browse()
        .unwrap()
        .peek(HIGH, QueueState::Delayed, 10)
        .await
        .unwrap();
    assert_eq!(
        peeked.iter().map(Message::id).collect::<Vec<_>>(),
        ["later-1", "later-2"]
    );
    let waiting = driver
        .browse()
        .unwrap()
        .peek(DEFAULT_PRIORITY, QueueState::Waiting, 10)
        .await
        .unwrap();
    assert_eq!(waiting, [due]);

    assert_eq!(
        driver
            .inspect()
            .unwrap()
            .purge(HIGH, QueueState::Delayed)
            .await
            .unwrap(),
        Some(2)
    );
    let stats = driver.inspect().unwrap().stats().await.unwrap();
    assert_eq!(stats[0].delayed, Figure::Exact(0));
    assert_eq!(stats[1].delayed, Figure::Exact(1), "the default's stays");
    assert!(
        driver
            .browse()
            .unwrap()
            .delete(DEFAULT_PRIORITY, "later-3")
            .await
            .unwrap()
    );
    assert_eq!(
        driver.inspect().unwrap().stats().await.unwrap()[1].delayed,
        Figure::Exact(0)
    );
    cleanup(&queue).await;
}

/// Past [`LATENCY_SCAN_LIMIT`] members the latency is unknown rather than a sample's guess;
/// the counts stay exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_latency_of_a_large_set_is_unknown_not_guessed() {
    let queue = unique_queue_name("stats-large");
    let driver = open(&queue, Retention::default()).await;
    let messages: Vec<Message> = (0..=LATENCY_SCAN_LIMIT as u32).map(message).collect();
    driver
        .send_batch(&messages, DEFAULT_PRIORITY)
        .await
        .unwrap();
    let default = driver
        .inspect()
        .unwrap()
        .stats()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.priority == DEFAULT_PRIORITY)
        .unwrap();
    assert_eq!(default.waiting, Figure::Exact(LATENCY_SCAN_LIMIT + 1));
    assert_eq!(default.latency, Figure::Unknown);
    assert_eq!(
        driver
            .inspect()
            .unwrap()
            .purge(DEFAULT_PRIORITY, QueueState::Waiting)
            .await
            .unwrap(),
        Some(LATENCY_SCAN_LIMIT + 1)
    );
    cleanup(&queue).await;
}

/// `from_url` reaches the server with each client library, with the key it names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_url_opens_the_queue_it_names_with_either_client() {
    for client in ["redis", "fred"] {
        let queue = unique_queue_name("from-url");
        let url = format!(
            "{}/0?key={queue}&schedule_key={queue}_schedule&client={client}",
            redis_url()
        );
        let driver = RedisSetDriver::from_url(&url).await.expect("connects");
        assert_eq!(
            driver.name(),
            if client == "fred" {
                "redis-fred"
            } else {
                "redis"
            }
        );
        driver.send(&message(1), DEFAULT_PRIORITY).await.unwrap();
        let members: i64 = cmd(&[b"SCARD", queue.as_bytes()]).await;
        assert_eq!(members, 1, "{client}");
        cleanup(&queue).await;
    }
}

/// Two messages that carry one id (ids an application chose) are two dead letters, neither
/// overwriting the other; replaying that id puts both back, and a delete by it removes one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_with_one_message_id_are_kept_apart() {
    let queue = unique_queue_name("dead-same-id");
    let driver = open(&queue, Retention::default()).await;
    for n in 0..3 {
        let message = Message::builder("inspected")
            .id("order-42")
            .payload(&serde_json::json!({ "n": n }))
            .build()
            .unwrap();
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
        bury_one(&driver, DEFAULT_PRIORITY, "failed").await;
    }
    let letters = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 10)
        .await
        .unwrap();
    assert_eq!(letters.len(), 3, "none overwrote another");
    assert!(letters.iter().all(|l| l.id == "order-42"));
    assert!(
        driver
            .browse()
            .unwrap()
            .delete(DEFAULT_PRIORITY, "order-42")
            .await
            .unwrap()
    );
    assert_eq!(
        driver
            .dead_letters()
            .unwrap()
            .list(DEFAULT_PRIORITY, 10)
            .await
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        driver
            .dead_letters()
            .unwrap()
            .replay(DEFAULT_PRIORITY, &Replay::ids(["order-42"]))
            .await
            .unwrap(),
        2
    );
    let waiting: i64 = cmd(&[b"SCARD", queue.as_bytes()]).await;
    assert_eq!(waiting, 2);
    cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workers_hash_expires_once_no_worker_announces() {
    for setup in [Setup::REDIS_RS, Setup::FRED] {
        let queue = unique_queue_name("workers-ttl");
        let driver = setup.connect(setup.options(&queue)).await.expect("Redis");
        let key = format!("{queue}_workers");
        let lasting = hermes_core::workers::WorkerInfo::new(1, &[], Duration::from_secs(5));
        let brief = hermes_core::workers::WorkerInfo::new(1, &[], Duration::from_millis(800));
        driver
            .workers()
            .unwrap()
            .announce(&lasting, Duration::from_secs(5))
            .await
            .unwrap();
        driver
            .workers()
            .unwrap()
            .announce(&brief, Duration::from_millis(800))
            .await
            .unwrap();
        let ttl: i64 = cmd(&[b"PTTL", key.as_bytes()]).await;
        assert!(
            ttl > 4000 && ttl <= 5000,
            "a shorter announcement does not shorten the hash's life: {ttl} ms"
        );
        cmd::<i64>(&[b"DEL", key.as_bytes()]).await;

        // A worker killed without withdrawing: nobody lists the workers, yet the key goes away
        // by itself once its announcement has run out.
        driver
            .workers()
            .unwrap()
            .announce(&brief, Duration::from_millis(800))
            .await
            .unwrap();
        let exists: i64 = cmd(&[b"EXISTS", key.as_bytes()]).await;
        assert_eq!(exists, 1);
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let exists: i64 = cmd(&[b"EXISTS", key.as_bytes()]).await;
        assert_eq!(exists, 0, "{setup:?}");
        assert!(driver.workers().unwrap().list().await.unwrap().is_empty());
    }
}
