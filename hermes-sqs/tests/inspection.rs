//! Inspection and dead letters as SQS keeps them: the dead letter's body and attributes, the
//! priority queues' plain bodies, the exact bytes of a replayed undecodable body, the letters
//! of two priorities kept apart, SQS's approximate figures, what a purge removes, and
//! `SqsDriver::from_url` against the server.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{client, count, open, options, queue_url, sqs_or_skip, take_raw};
use hermes_core::driver::Delivery;
use hermes_core::inspect::{DeadKind, DeadReason, Figure, QueueState, QueueStats, Replay};
use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, JsonSerializer, Message, Serializer};
use hermes_sqs::aws_sdk_sqs::Client;
use hermes_sqs::aws_sdk_sqs::types::{
    Message as SqsMessage, MessageAttributeValue, QueueAttributeName,
};
use hermes_sqs::{
    AT_ATTRIBUTE, ERROR_ATTRIBUTE, HANDLER_ATTRIBUTE, KIND_ATTRIBUTE, MAX_ERROR_LEN,
    QUEUE_ATTRIBUTE, RETRIES_ATTRIBUTE, SqsDriver, quarantine_queue,
};
use hermes_testkit::suite::unique_queue_name;

/// A body as PHP Hermes writes it: escaped slashes and `\u` escapes, which Hermes for Rust's
/// own encoding would write differently.
const PHP_JSON: &str = r#"{"message":{"id":"php-1","type":"send-email","created":1637617498.172724,"payload":{"to":"a\/b@x.sk","name":"\u017dlt\u00fd k\u00f4\u0148"},"execute_at":null,"retries":3}}"#;

const HIGH: i32 = 110;

async fn send_raw(client: &Client, queue: &str, body: &str) {
    let url = queue_url(client, queue).await;
    client
        .send_message()
        .queue_url(url)
        .message_body(body)
        .send()
        .await
        .expect("sending with the SDK");
}

/// The messages of the existing queue `queue`, with their attributes, left visible
/// (`VisibilityTimeout=0`).
async fn look(client: &Client, queue: &str) -> Vec<SqsMessage> {
    let url = client
        .get_queue_url()
        .queue_name(queue)
        .send()
        .await
        .expect("the queue exists")
        .queue_url
        .expect("a queue URL");
    client
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .visibility_timeout(0)
        .message_attribute_names("All")
        .send()
        .await
        .expect("receiving with the SDK")
        .messages
        .unwrap_or_default()
}

fn text(attributes: &HashMap<String, MessageAttributeValue>, name: &str) -> String {
    attributes
        .get(name)
        .and_then(|v| v.string_value())
        .unwrap_or_else(|| panic!("no attribute {name}"))
        .to_owned()
}

/// The `MessageRetentionPeriod` of the existing queue `queue`.
async fn retention(queue: &str) -> String {
    let sdk = client().await;
    let url = sdk
        .get_queue_url()
        .queue_name(queue)
        .send()
        .await
        .expect("the queue exists")
        .queue_url
        .expect("a queue URL");
    let answer = sdk
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::MessageRetentionPeriod)
        .send()
        .await
        .expect("the queue's attributes");
    answer.attributes().expect("attributes")[&QueueAttributeName::MessageRetentionPeriod].clone()
}

async fn claim(driver: &SqsDriver) -> Delivery {
    driver
        .receive(&[], Duration::from_secs(5))
        .await
        .expect("receive")
        .expect("a message")
}

fn failure(error: &str) -> DeadReason {
    DeadReason::new(DeadKind::Failed, error)
        .with_handler("Archiver")
        .with_retries(3)
}

fn default_stats(stats: &[QueueStats]) -> &QueueStats {
    stats
        .iter()
        .find(|s| s.priority == DEFAULT_PRIORITY)
        .expect("the default queue")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_keeps_the_body_unchanged_and_its_reason_in_attributes() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("dead-attrs");
    let sdk = client().await;
    send_raw(&sdk, &queue, PHP_JSON).await;
    let driver = open(&queue, options()).await;
    let delivery = claim(&driver).await;
    let long_error = format!("the disk is full {}", "é".repeat(2000));
    let before = unix_now();
    driver
        .dead_letters()
        .unwrap()
        .add(&delivery, &failure(&long_error))
        .await
        .expect("dead-lettering");
    assert_eq!(count(&sdk, &queue).await, 0, "deleted from its queue");

    let kept = look(&sdk, &quarantine_queue(&queue)).await;
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].body(), Some(PHP_JSON), "the body as PHP wrote it");
    let attributes = kept[0].message_attributes().expect("attributes");
    assert!(attributes.len() <= 10, "SQS's limit");
    assert_eq!(text(attributes, KIND_ATTRIBUTE), "failed");
    assert_eq!(text(attributes, HANDLER_ATTRIBUTE), "Archiver");
    assert_eq!(text(attributes, RETRIES_ATTRIBUTE), "3");
    assert_eq!(text(attributes, QUEUE_ATTRIBUTE), queue);
    let error = text(attributes, ERROR_ATTRIBUTE);
    assert!(error.len() <= MAX_ERROR_LEN && error.len() > MAX_ERROR_LEN - 4);
    assert!(long_error.starts_with(&error), "cut, not changed");
    let at: f64 = text(attributes, AT_ATTRIBUTE).parse().expect("a number");
    assert!(at >= before - 1.0 && at <= unix_now() + 1.0, "{at}");
    assert_eq!(attributes[AT_ATTRIBUTE].data_type(), "Number");

    let letters = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 10)
        .await
        .unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].id, "php-1");
    assert_eq!(letters[0].reason.kind, DeadKind::Failed);
    assert_eq!(letters[0].reason.error, error);
    assert_eq!(letters[0].reason.retries, 3);
    assert_eq!(letters[0].message.as_ref(), Some(delivery.message()));
    common::cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queues_keep_plain_hermes_json_also_after_a_replay() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("dead-plain");
    let sdk = client().await;
    let driver = open(&queue, options()).await;
    let message = Message::builder("report.export")
        .id("plain-1")
        .payload(&serde_json::json!({"report": "sales"}))
        .retries(4)
        .build()
        .unwrap();
    driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    let delivery = claim(&driver).await;
    driver
        .dead_letters()
        .unwrap()
        .add(&delivery, &failure("no"))
        .await
        .unwrap();
    let replayed = driver
        .dead_letters()
        .unwrap()
        .replay(DEFAULT_PRIORITY, &Replay::all())
        .await
        .unwrap();
    assert_eq!(replayed, 1);

    let back = look(&sdk, &queue).await;
    assert_eq!(back.len(), 1);
    assert!(
        back[0].message_attributes().is_none_or(|a| a.is_empty()),
        "no attributes on a queue PHP reads: {:?}",
        back[0].message_attributes()
    );
    let again = message.replay_copy(false);
    let expected = String::from_utf8(JsonSerializer.serialize(&again).unwrap()).unwrap();
    assert_eq!(
        back[0].body(),
        Some(expected.as_str()),
        "Hermes' JSON, nothing more"
    );
    assert_eq!(
        count(&sdk, &quarantine_queue(&queue)).await,
        0,
        "replayed, so gone"
    );
    common::cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_body_replays_as_its_exact_bytes() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("dead-bytes");
    let sdk = client().await;
    let garbage = "{\"message\": \tnot json at all, \u{17d}lt\u{fd} \u{1F600}\n";
    send_raw(&sdk, &queue, garbage).await;
    let driver = open(&queue, options()).await;
    let err = driver
        .receive(&[], Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Undecodable { .. }), "{err}");

    let letters = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 10)
        .await
        .unwrap();
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(letter.reason.kind, DeadKind::Undecodable);
    assert!(letter.message.is_none());
    assert!(
        !letter.reason.error.contains("not json"),
        "no input in the reason"
    );
    assert!(!letter.id.is_empty(), "SQS's message id");
    // A replay of another id leaves it.
    assert_eq!(
        driver
            .dead_letters()
            .unwrap()
            .replay(DEFAULT_PRIORITY, &Replay::ids(["nope"]))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        driver
            .dead_letters()
            .unwrap()
            .replay(DEFAULT_PRIORITY, &Replay::ids([letter.id.clone()]))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        take_raw(&sdk, &queue, 10).await,
        [garbage],
        "the same bytes"
    );
    assert!(
        driver
            .dead_letters()
            .unwrap()
            .list(DEFAULT_PRIORITY, 10)
            .await
            .unwrap()
            .is_empty()
    );
    common::cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_of_two_priorities_are_kept_apart() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("dead-apart");
    let high = format!("{queue}-high");
    let sdk = client().await;
    let driver = open(&queue, options()).await;
    driver.setup_priority_queue(&high, HIGH).unwrap();
    for (id, priority) in [
        ("low-1", DEFAULT_PRIORITY),
        ("high-1", HIGH),
        ("high-2", HIGH),
    ] {
        let message = Message::builder("t").id(id).build().unwrap();
        driver.send(&message, priority).await.unwrap();
    }
    for _ in 0..3 {
        let delivery = claim(&driver).await;
        let error = format!("failed {}", delivery.message().id());
        driver
            .dead_letters()
            .unwrap()
            .add(&delivery, &failure(&error))
            .await
            .unwrap();
    }
    let ids = |letters: Vec<hermes_core::inspect::DeadLetter>| {
        let mut ids: Vec<String> = letters.into_iter().map(|l| l.id).collect();
        ids.sort();
        ids
    };
    let low = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 10)
        .await
        .unwrap();
    assert!(low.iter().all(|l| l.priority == DEFAULT_PRIORITY));
    assert_eq!(ids(low), ["low-1"]);
    let highs = driver.dead_letters().unwrap().list(HIGH, 10).await.unwrap();
    assert!(highs.iter().all(|l| l.priority == HIGH));
    assert_eq!(ids(highs), ["high-1", "high-2"]);

    // SQS counts the shared dead-letter queue as a whole: whose letters they are is unknown.
    let stats = driver.inspect().unwrap().stats().await.unwrap();
    assert_eq!(stats.len(), 2);
    assert_eq!(stats[0].priority, HIGH, "highest first");
    assert!(stats.iter().all(|s| s.dead == Figure::Unknown), "{stats:?}");

    assert_eq!(
        driver
            .dead_letters()
            .unwrap()
            .replay(HIGH, &Replay::ids(["high-2"]))
            .await
            .unwrap(),
        1
    );
    assert_eq!(count(&sdk, &high).await, 1, "back on its own queue");
    assert_eq!(count(&sdk, &queue).await, 0);
    assert_eq!(
        driver
            .inspect()
            .unwrap()
            .purge(HIGH, QueueState::Dead)
            .await
            .unwrap(),
        Some(1)
    );
    assert!(
        driver
            .dead_letters()
            .unwrap()
            .list(HIGH, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        ids(driver
            .dead_letters()
            .unwrap()
            .list(DEFAULT_PRIORITY, 10)
            .await
            .unwrap()),
        ["low-1"],
        "the other queue's letter stays"
    );
    common::cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn letters_are_listed_oldest_first_each_once_and_stay_visible() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("dead-order");
    let sdk = client().await;
    let driver = open(&queue, options()).await;
    for n in 0..12 {
        let message = Message::builder("t")
            .id(format!("m{n:02}"))
            .build()
            .unwrap();
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    }
    for _ in 0..12 {
        let delivery = claim(&driver).await;
        let n: f64 = delivery.message().id()[1..].parse().unwrap();
        // The later the number, the older the letter.
        let mut reason = failure("old");
        reason.at = unix_now() - 1000.0 - n;
        driver
            .dead_letters()
            .unwrap()
            .add(&delivery, &reason)
            .await
            .unwrap();
    }
    let letters = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 100)
        .await
        .unwrap();
    let ids: Vec<&str> = letters.iter().map(|l| l.id.as_str()).collect();
    let want: Vec<String> = (0..12).rev().map(|n| format!("m{n:02}")).collect();
    assert_eq!(ids, want, "oldest first, each once");
    let first = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 2)
        .await
        .unwrap();
    assert_eq!(first.len(), 2);
    assert_eq!(first[0].id, "m11");
    // Made visible again: a plain receive sees them at once.
    assert_eq!(look(&sdk, &quarantine_queue(&queue)).await.len(), 10);
    let stats = driver.inspect().unwrap().stats().await.unwrap();
    assert_eq!(default_stats(&stats).dead, Figure::Approximate(12));
    common::cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_count_cap_drops_the_oldest_letters() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("dead-cap");
    let mut options = options();
    options.retention.max_count = 3;
    options.retention.max_age = Duration::from_secs(3600);
    let driver = open(&queue, options).await;
    for n in 0..5 {
        let message = Message::builder("t").id(format!("c{n}")).build().unwrap();
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
        let delivery = claim(&driver).await;
        driver
            .dead_letters()
            .unwrap()
            .add(&delivery, &failure("x"))
            .await
            .unwrap();
    }
    let letters = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 10)
        .await
        .unwrap();
    let ids: Vec<&str> = letters.iter().map(|l| l.id.as_str()).collect();
    assert_eq!(ids, ["c2", "c3", "c4"], "the oldest dropped");
    // The age is the dead-letter queue's retention.
    assert_eq!(retention(&quarantine_queue(&queue)).await, "3600");
    common::cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn figures_are_sqs_approximate_counts_and_latency_is_unknown() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("stats");
    let sdk = client().await;
    let driver = open(&queue, options()).await;
    // A queue that does not exist yet counts nothing, and is not created.
    let empty = driver.inspect().unwrap().stats().await.unwrap();
    let empty = default_stats(&empty);
    assert_eq!(empty.waiting, Figure::Approximate(0));
    assert_eq!(empty.latency, Figure::Unknown);
    assert!(
        sdk.get_queue_url().queue_name(&queue).send().await.is_err(),
        "not created"
    );

    for n in 0..4 {
        let message = Message::builder("t").id(format!("s{n}")).build().unwrap();
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    }
    for delay in [60, 2000] {
        let later = Message::builder("t")
            .delay(Duration::from_secs(delay))
            .build()
            .unwrap();
        driver.send(&later, DEFAULT_PRIORITY).await.unwrap();
    }
    // One handed out; the rest of its batch is held by this process, still waiting.
    let held = claim(&driver).await;
    let stats = driver.inspect().unwrap().stats().await.unwrap();
    let stats = default_stats(&stats);
    assert_eq!(stats.waiting, Figure::Approximate(3), "{stats:?}");
    assert_eq!(stats.in_flight, Figure::Approximate(1), "{stats:?}");
    assert_eq!(
        stats.delayed,
        Figure::Approximate(2),
        "with the one in the delay queue: {stats:?}"
    );
    assert_eq!(stats.dead, Figure::Approximate(0));
    assert_eq!(stats.latency, Figure::Unknown);
    driver
        .dead_letters()
        .unwrap()
        .add(&held, &failure("x"))
        .await
        .unwrap();
    let stats = driver.inspect().unwrap().stats().await.unwrap();
    let stats = default_stats(&stats);
    assert_eq!(stats.in_flight, Figure::Approximate(0), "{stats:?}");
    assert_eq!(stats.dead, Figure::Approximate(1), "{stats:?}");
    common::cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_of_waiting_messages_leaves_delayed_and_claimed_ones() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("purge");
    let sdk = client().await;
    let driver = open(&queue, options()).await;
    for n in 0..4 {
        let message = Message::builder("t").id(format!("p{n}")).build().unwrap();
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    }
    let later = Message::builder("t")
        .delay(Duration::from_secs(60))
        .build()
        .unwrap();
    driver.send(&later, DEFAULT_PRIORITY).await.unwrap();
    // Another worker claims one.
    let mut one = options();
    one.batch_size = 1;
    let other = open(&queue, one).await;
    let claimed = claim(&other).await;

    let purged = driver
        .inspect()
        .unwrap()
        .purge(DEFAULT_PRIORITY, QueueState::Waiting)
        .await
        .unwrap();
    assert_eq!(purged, Some(3));
    assert_eq!(
        count(&sdk, &queue).await,
        2,
        "the delayed and the claimed one"
    );
    for state in [QueueState::Delayed, QueueState::InFlight] {
        let err = driver
            .inspect()
            .unwrap()
            .purge(DEFAULT_PRIORITY, state)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Unsupported { .. }), "{state}: {err}");
    }
    assert!(
        driver.browse().is_none(),
        "no peek or delete by id: SQS cannot read a message without claiming it"
    );
    other.ack(&claimed).await.unwrap();
    common::cleanup(&queue).await;
}

/// Set in the environment of the child process of `from_url_reads_the_url_and_the_environment`.
const CHILD: &str = "HERMES_SQS_FROM_URL_CHILD";

/// `SqsDriver::from_url` takes its credentials from the environment, which a test cannot set
/// in its own process: this test runs itself again in a child process whose environment has
/// the test credentials, no region and no instance metadata, and the child does the checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_url_reads_the_url_and_the_environment() {
    let Ok(queue) = std::env::var(CHILD) else {
        if !sqs_or_skip().await {
            return;
        }
        let queue = unique_queue_name("from-url");
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "from_url_reads_the_url_and_the_environment",
                "--exact",
                "--nocapture",
            ])
            .env(CHILD, &queue)
            .env("AWS_ACCESS_KEY_ID", "AKIDTEST")
            .env("AWS_SECRET_ACCESS_KEY", "secret")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_CONFIG_FILE", "/nonexistent/hermes-test")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/hermes-test")
            .env_remove("AWS_REGION")
            .env_remove("AWS_DEFAULT_REGION")
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_ENDPOINT_URL")
            .env_remove("AWS_ENDPOINT_URL_SQS")
            .status()
            .expect("running the child");
        common::cleanup(&queue).await;
        assert!(status.success(), "the child failed: {status}");
        return;
    };
    let endpoint = common::endpoint();
    let url = format!(
        "sqs://{queue}?endpoint={endpoint}&region=us-east-1&wait_time=1&visibility_timeout=2&retention_age=7200"
    );
    let driver = SqsDriver::from_url(&url).await.expect("a driver");
    assert_eq!(driver.queue(), queue);
    let message = Message::builder("t").id("url-1").build().unwrap();
    driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    let delivery = claim(&driver).await;
    assert_eq!(delivery.message(), &message);
    assert!(
        delivery
            .lease()
            .is_some_and(|l| l <= Duration::from_secs(2)),
        "visibility_timeout=2 asked for: {:?}",
        delivery.lease()
    );
    driver
        .dead_letters()
        .unwrap()
        .add(&delivery, &failure("x"))
        .await
        .unwrap();
    let stats = driver.inspect().unwrap().stats().await.unwrap();
    assert_eq!(default_stats(&stats).dead, Figure::Approximate(1));
    assert_eq!(retention(&quarantine_queue(&queue)).await, "7200");
    // A driver from a URL of a server that takes the connection and never answers fails
    // within the bound of every call.
    let silent = format!(
        "sqs://{queue}?endpoint=http://127.0.0.1:{}&region=us-east-1",
        hermes_testkit::silent_port()
    );
    let silent = SqsDriver::from_url(&silent).await.expect("a driver");
    let started = std::time::Instant::now();
    let err = silent.inspect().unwrap().stats().await.unwrap_err();
    assert!(err.is_temporary(), "{err}");
    assert!(
        started.elapsed() < common::CALL_LIMIT + Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    // Without a region in the URL or the environment, and no instance metadata to ask.
    let err = SqsDriver::from_url(&format!("sqs://{queue}?endpoint={endpoint}"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("region"), "{err}");
}
