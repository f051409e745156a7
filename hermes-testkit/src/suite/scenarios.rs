//! The scenarios. Each takes the harness and a queue name of its own, and panics on failure.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_core::driver::Delivery;
use hermes_core::time::unix_now;
use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, Driver, Emitter, Error, HandlerError, JsonSerializer, Message,
    Priority, RetryPolicy, Serializer, handler_fn,
};
use serde_json::json;
use tokio::time::Instant;

pub use super::cron::three_schedulers_emit_one_message_per_tick;
pub use super::inspection::{
    failed_messages_become_dead_letters_and_replay, peek_leaves_messages_where_they_were,
    purge_empties_only_what_it_names, stats_count_every_state,
    workers_are_listed_until_they_expire,
};
pub use super::jobs::{
    a_handler_past_its_time_limit_is_cancelled_and_retried, typed_jobs_meet_php_messages,
};
pub use super::raw_fuzz::random_raw_inputs_are_delivered_or_quarantined;
pub use super::unique::{
    a_crashed_workers_unique_key_frees_after_its_window,
    a_unique_key_is_free_once_its_message_is_done, concurrent_unique_emits_queue_one_message,
};
use super::{Harness, Outcome};

/// The priority of the `-high` queue the scenarios set up.
pub const HIGH: Priority = 200;
/// The priority of the `-low` queue the scenarios set up.
pub const LOW: Priority = 50;

/// A receive wait long enough for any backend to deliver a message that is there.
pub(super) const PATIENCE: Duration = Duration::from_secs(10);
/// A receive wait for "nothing is there".
const BRIEF: Duration = Duration::from_millis(1500);

pub(super) async fn open<H: Harness>(h: &H, queue: &str) -> H::Driver {
    h.open(queue)
        .await
        .unwrap_or_else(|e| panic!("opening a driver on {queue}: {e}"))
}

/// Opens an instance with the `-high` and `-low` priority queues set up, or `None` when the
/// driver has no priorities.
async fn open_with_priorities<H: Harness>(h: &H, queue: &str) -> Option<H::Driver> {
    let driver = open(h, queue).await;
    if !driver.capabilities().priorities {
        return None;
    }
    driver
        .setup_priority_queue(&format!("{queue}-high"), HIGH)
        .expect("setting up the high queue");
    driver
        .setup_priority_queue(&format!("{queue}-low"), LOW)
        .expect("setting up the low queue");
    Some(driver)
}

pub(super) fn message(message_type: &str, n: usize) -> Message {
    Message::builder(message_type)
        .payload(&json!({ "n": n }))
        .build()
        .expect("a valid message")
}

pub(super) async fn send(driver: &impl Driver, message: &Message, priority: Priority) {
    driver
        .send(message, priority)
        .await
        .unwrap_or_else(|e| panic!("sending #{}: {e}", message.id()));
}

async fn receive(
    driver: &impl Driver,
    priorities: &[Priority],
    wait: Duration,
) -> Option<Delivery> {
    driver
        .receive(priorities, wait)
        .await
        .unwrap_or_else(|e| panic!("receiving: {e}"))
}

async fn expect_one(driver: &impl Driver, priorities: &[Priority]) -> Delivery {
    receive(driver, priorities, PATIENCE)
        .await
        .unwrap_or_else(|| panic!("no message arrived within {PATIENCE:?}"))
}

pub(super) async fn ack(driver: &impl Driver, delivery: &Delivery) {
    driver.ack(delivery).await.expect("acknowledging");
}

pub(super) async fn expect_none(driver: &impl Driver, priorities: &[Priority], wait: Duration) {
    if let Some(d) = receive(driver, priorities, wait).await {
        panic!(
            "expected no message, got #{} ({}) retries {}",
            d.message().id(),
            d.message().message_type(),
            d.message().retries()
        );
    }
}

fn scaled<H: Harness>(h: &H, n: usize) -> usize {
    ((n as f64 * h.scale()).ceil() as usize).clamp(4, n)
}

/// A message sent and received keeps its id, type, payload (key order included), created,
/// execute_at and retries, and comes with the priority it was sent to.
pub async fn round_trip_keeps_every_field<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let sent = Message::builder("round-trip")
        .id(format!("id-{queue}"))
        .payload(&json!({"z": 1, "a": [1, 2.5, "x"], "m": {"k": null, "b": true}}))
        .created(1637617498.172724)
        .execute_at(unix_now() - 5.0)
        .retries(7)
        .build()
        .unwrap();
    send(&driver, &sent, DEFAULT_PRIORITY).await;
    let got = expect_one(&driver, &[]).await;
    assert_eq!(got.message(), &sent);
    assert_eq!(got.priority(), DEFAULT_PRIORITY);
    let keys: Vec<_> = got
        .message()
        .payload()
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["z", "a", "m"], "payload keys keep their order");
    ack(&driver, &got).await;
    Outcome::Passed
}

/// A message as PHP Hermes writes it: `/` escaped, non-ASCII as `\u` escapes.
const PHP_JSON: &str = r#"{"message":{"id":"php-1","type":"send-email","created":1637617498.172724,"payload":{"to":"a\/b@x.sk","name":"\u017dlt\u00fd k\u00f4\u0148"},"execute_at":null,"retries":0}}"#;

/// The bytes PHP Hermes writes for the message [`php_json_in_hermes_json_out`] sends.
const HERMES_JSON: &str = r#"{"message":{"id":"rust-1","type":"send-email","created":1700000000,"payload":{"to":"a\/b@x.sk","name":"\u017dlt\u00fd k\u00f4\u0148"},"execute_at":1700000100.5,"retries":3}}"#;

/// PHP and Rust share a queue: a message PHP Hermes wrote, put on the queue as raw bytes, is
/// delivered with every field as PHP wrote it, and a message the driver sends lies on the queue
/// as exactly the bytes PHP Hermes writes for it (Hermes' JSON), and nothing else.
pub async fn php_json_in_hermes_json_out<H: Harness>(h: &H, queue: &str) -> Outcome {
    if !h.carries_raw(PHP_JSON.as_bytes()) {
        return Outcome::Skipped("the harness cannot push PHP's JSON unchanged".to_owned());
    }
    let payload = json!({"to": "a/b@x.sk", "name": "Žltý kôň"});
    let worker = open(h, queue).await;
    h.push_raw(queue, PHP_JSON.as_bytes())
        .await
        .expect("pushing PHP's JSON");
    let got = expect_one(&worker, &[]).await;
    let php = Message::builder("send-email")
        .id("php-1")
        .created(1637617498.172724)
        .payload(&payload)
        .build()
        .unwrap();
    assert_eq!(got.message(), &php, "PHP's message, field by field");
    let m = got.message();
    assert_eq!((m.execute_at(), m.retries()), (None, 0));
    let keys: Vec<_> = m.payload().unwrap().as_object().unwrap().keys().collect();
    assert_eq!(keys, ["to", "name"], "payload keys keep their order");
    assert_eq!(got.priority(), DEFAULT_PRIORITY);
    ack(&worker, &got).await;
    // A worker that is done gives back what it took ahead, as the dispatcher has it do.
    worker.flush().await.expect("flushing");

    let emitter = open(h, queue).await;
    let ours = Message::builder("send-email")
        .id("rust-1")
        .created(1700000000.0)
        .payload(&payload)
        .execute_at(1700000100.5)
        .retries(3)
        .build()
        .unwrap();
    send(&emitter, &ours, DEFAULT_PRIORITY).await;
    let raw = h
        .pull_raw(queue)
        .await
        .expect("pulling raw bytes")
        .expect("the message sent is not on the queue");
    assert_eq!(
        String::from_utf8_lossy(&raw),
        HERMES_JSON,
        "the bytes on the queue are not Hermes' JSON"
    );
    assert_eq!(
        raw,
        JsonSerializer.serialize(&ours).expect("encoding"),
        "the bytes on the queue are not what JsonSerializer writes"
    );
    if let Some(more) = h.pull_raw(queue).await.expect("pulling raw bytes") {
        panic!(
            "after one send, a second body of {} bytes is on the queue",
            more.len()
        );
    }
    Outcome::Passed
}

/// Sending to a priority without a queue, and receiving with a filter naming one, fail with
/// `UnknownPriority`; nothing is sent.
pub async fn unknown_priority_fails<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let err = driver.send(&message("t", 1), 12345).await.unwrap_err();
    assert!(matches!(err, Error::UnknownPriority(12345)), "send: {err}");
    let err = driver.receive(&[12345], BRIEF).await.unwrap_err();
    assert!(
        matches!(err, Error::UnknownPriority(12345)),
        "receive: {err}"
    );
    let err = driver
        .receive(&[DEFAULT_PRIORITY, 777], BRIEF)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownPriority(777)), "receive: {err}");
    expect_none(&driver, &[], Duration::from_millis(200)).await;
    Outcome::Passed
}

/// With messages waiting on several priorities, the highest priority comes first.
pub async fn highest_priority_first<H: Harness>(h: &H, queue: &str) -> Outcome {
    let Some(driver) = open_with_priorities(h, queue).await else {
        return Outcome::lacks("priorities");
    };
    send(&driver, &message("low", 1), LOW).await;
    send(&driver, &message("default", 2), DEFAULT_PRIORITY).await;
    send(&driver, &message("high", 3), HIGH).await;
    let mut order = Vec::new();
    for _ in 0..3 {
        let d = expect_one(&driver, &[]).await;
        order.push((d.message().message_type().to_owned(), d.priority()));
        ack(&driver, &d).await;
    }
    assert_eq!(
        order,
        [
            ("high".to_owned(), HIGH),
            ("default".to_owned(), DEFAULT_PRIORITY),
            ("low".to_owned(), LOW)
        ]
    );
    Outcome::Passed
}

/// A receive filtered to some priorities takes nothing from the others.
pub async fn priority_filter<H: Harness>(h: &H, queue: &str) -> Outcome {
    let Some(driver) = open_with_priorities(h, queue).await else {
        return Outcome::lacks("priorities");
    };
    send(&driver, &message("high", 1), HIGH).await;
    send(&driver, &message("default", 2), DEFAULT_PRIORITY).await;
    let d = expect_one(&driver, &[DEFAULT_PRIORITY, LOW]).await;
    assert_eq!(d.message().message_type(), "default");
    assert_eq!(d.priority(), DEFAULT_PRIORITY);
    ack(&driver, &d).await;
    expect_none(&driver, &[DEFAULT_PRIORITY, LOW], BRIEF).await;
    let d = expect_one(&driver, &[HIGH]).await;
    assert_eq!(d.message().message_type(), "high");
    assert_eq!(d.priority(), HIGH);
    ack(&driver, &d).await;
    Outcome::Passed
}

/// Messages of one priority come out in the order they were sent.
pub async fn fifo_within_priority<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    if !driver.capabilities().fifo {
        return Outcome::lacks("fifo");
    }
    let n = scaled(h, 20);
    for i in 0..n {
        send(&driver, &message("fifo", i), DEFAULT_PRIORITY).await;
    }
    for i in 0..n {
        let d = expect_one(&driver, &[]).await;
        assert_eq!(
            d.message().payload().unwrap()["n"],
            json!(i),
            "message {i} out of order"
        );
        ack(&driver, &d).await;
    }
    Outcome::Passed
}

/// A message due in the future is not delivered before it is due, and is delivered once due.
pub async fn delayed_message_waits_until_due<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    if !driver.capabilities().delay {
        return Outcome::lacks("delay");
    }
    let delayed = Message::builder("delayed")
        .delay(Duration::from_secs(3))
        .build()
        .unwrap();
    let due = delayed.execute_at().unwrap();
    send(&driver, &delayed, DEFAULT_PRIORITY).await;
    send(&driver, &message("now", 1), DEFAULT_PRIORITY).await;
    let first = expect_one(&driver, &[]).await;
    assert_eq!(
        first.message().message_type(),
        "now",
        "the due message comes first"
    );
    ack(&driver, &first).await;
    expect_none(&driver, &[], Duration::from_secs(1)).await;
    let d = expect_one(&driver, &[]).await;
    let now = unix_now();
    assert_eq!(d.message().id(), delayed.id());
    assert!(now >= due - 0.001, "delivered {:.3}s early", due - now);
    ack(&driver, &d).await;
    Outcome::Passed
}

/// A delayed message sent to a priority comes back on that priority.
pub async fn delayed_message_keeps_priority<H: Harness>(h: &H, queue: &str) -> Outcome {
    let Some(driver) = open_with_priorities(h, queue).await else {
        return Outcome::lacks("priorities");
    };
    if !driver.capabilities().delay {
        return Outcome::lacks("delay");
    }
    let delayed = Message::builder("delayed-high")
        .delay(Duration::from_secs(1))
        .build()
        .unwrap();
    send(&driver, &delayed, HIGH).await;
    let d = expect_one(&driver, &[HIGH]).await;
    assert_eq!(d.message().id(), delayed.id());
    assert_eq!(d.priority(), HIGH);
    ack(&driver, &d).await;
    expect_none(&driver, &[], Duration::from_millis(300)).await;
    Outcome::Passed
}

/// Under the dispatcher, a delivery whose handlers fail produces exactly one delayed copy with
/// the same id, created time and priority and `retries + 1`; after the last retry, none.
pub async fn failing_handler_sends_one_delayed_copy<H: Harness>(h: &H, queue: &str) -> Outcome {
    let (driver, priority) = match open_with_priorities(h, queue).await {
        Some(driver) => (driver, HIGH),
        None => (open(h, queue).await, DEFAULT_PRIORITY),
    };
    let caps = driver.capabilities();
    let driver: Arc<dyn Driver> = Arc::new(driver);
    let original = message("failing", 1);
    send(&driver, &original, priority).await;

    /// The messages the first handler saw, with the time it saw them.
    type Seen = Arc<Mutex<Vec<(Message, f64)>>>;
    let seen: Seen = Arc::default();
    let failing = |seen: Option<Seen>| {
        Arc::new(
            handler_fn(move |m: Message| {
                let seen = seen.clone();
                async move {
                    if let Some(seen) = seen {
                        seen.lock().unwrap().push((m, unix_now()));
                    }
                    Err::<bool, _>(HandlerError::msg("deliberate failure"))
                }
            })
            .with_retry(RetryPolicy::fixed(Duration::from_secs(1), 1)),
        )
    };
    let run_one = || async {
        let mut dispatcher = Dispatcher::from_arc(driver.clone()).max_items(1);
        // Two failing handlers: still one copy per failed delivery.
        dispatcher.register_handler("failing", failing(Some(seen.clone())));
        dispatcher.register_handler("failing", failing(None));
        tokio::time::timeout(PATIENCE, dispatcher.handle(&[priority]))
            .await
            .expect("the dispatcher found no message")
            .expect("the dispatcher failed");
    };
    run_one().await; // the original: fails, sends a copy
    run_one().await; // the copy, found on the same priority: fails at the last retry
    expect_none(&driver, &[], Duration::from_secs(2)).await;

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let (copy, handled_at) = &seen[1];
    assert_eq!(copy.id(), original.id());
    assert_eq!(copy.created(), original.created());
    assert_eq!(copy.payload(), original.payload());
    assert_eq!(copy.retries(), 1);
    let due = copy.execute_at().expect("the copy is delayed");
    assert!(due >= seen[0].1 + 0.9, "the copy waits its backoff");
    if caps.delay {
        assert!(
            *handled_at >= due - 0.001,
            "the copy ran {:.3}s early",
            due - handled_at
        );
    }
    Outcome::Passed
}

/// A message given back with `nack` is delivered again.
pub async fn nack_redelivers<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let sent = message("nacked", 1);
    send(&driver, &sent, DEFAULT_PRIORITY).await;
    let d = expect_one(&driver, &[]).await;
    driver.nack(&d).await.expect("nack");
    let again = expect_one(&driver, &[]).await;
    assert_eq!(again.message().id(), sent.id());
    ack(&driver, &again).await;
    expect_none(&driver, &[], Duration::from_millis(300)).await;
    Outcome::Passed
}

/// An acknowledged message is not delivered again, even after the visibility timeout.
pub async fn ack_removes_for_good<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    send(&driver, &message("acked", 1), DEFAULT_PRIORITY).await;
    let d = expect_one(&driver, &[]).await;
    ack(&driver, &d).await;
    let wait = if driver.capabilities().at_least_once {
        h.visibility_timeout() + BRIEF
    } else {
        BRIEF
    };
    expect_none(&driver, &[], wait).await;
    Outcome::Passed
}

/// A message claimed by an instance that then vanishes without acknowledging it is delivered
/// again to another instance after the visibility timeout.
pub async fn vanished_instance_message_redelivered<H: Harness>(h: &H, queue: &str) -> Outcome {
    let first = open(h, queue).await;
    if !first.capabilities().at_least_once {
        return Outcome::lacks("at_least_once");
    }
    let second = open(h, queue).await;
    let sent = message("crash", 1);
    send(&first, &sent, DEFAULT_PRIORITY).await;
    let claimed = expect_one(&first, &[]).await;
    assert_eq!(claimed.message().id(), sent.id());
    let claimed_at = Instant::now();
    drop(claimed);
    drop(first);
    let wait = h.visibility_timeout() * 3 + PATIENCE;
    let again = receive(&second, &[], wait)
        .await
        .expect("the message of the vanished instance was not delivered again");
    assert_eq!(again.message().id(), sent.id());
    assert!(
        claimed_at.elapsed() + Duration::from_millis(50) >= h.visibility_timeout(),
        "redelivered after {:?}, before the visibility timeout",
        claimed_at.elapsed()
    );
    ack(&second, &again).await;
    Outcome::Passed
}

/// `extend` keeps a message claimed past the visibility timeout.
pub async fn extend_keeps_claim<H: Harness>(h: &H, queue: &str) -> Outcome {
    let first = open(h, queue).await;
    if !first.capabilities().extend || !first.capabilities().at_least_once {
        return Outcome::lacks("extend");
    }
    let second = open(h, queue).await;
    send(&first, &message("slow", 1), DEFAULT_PRIORITY).await;
    let claimed = expect_one(&first, &[]).await;
    let vt = h.visibility_timeout();
    let until = Instant::now() + vt * 2 + vt / 2;
    while Instant::now() < until {
        first.extend(&claimed, vt).await.expect("extend");
        expect_none(&second, &[], vt / 2).await;
    }
    ack(&first, &claimed).await;
    expect_none(&second, &[], vt + BRIEF).await;
    Outcome::Passed
}

/// A dispatcher whose handler runs for 2.5 visibility timeouts keeps the message claimed
/// (it extends the claim by the delivery's lease): a second worker never gets it, and it runs
/// once.
pub async fn dispatcher_keeps_a_slow_handlers_claim<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver: Arc<dyn Driver> = Arc::new(open(h, queue).await);
    if !driver.capabilities().extend || !driver.capabilities().at_least_once {
        return Outcome::lacks("extend");
    }
    send(&driver, &message("slow", 1), DEFAULT_PRIORITY).await;
    let vt = h.visibility_timeout();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let mut dispatcher = Dispatcher::from_arc(driver.clone())
        .concurrency(2)
        .max_items(2);
    dispatcher.register_handler(
        "slow",
        Arc::new(handler_fn(move |_m: Message| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(vt * 2 + vt / 2).await;
                Ok(true)
            }
        })),
    );
    // Never ends on its own (one message, two max items): stopped after the handler finished.
    let _ = tokio::time::timeout(vt * 3 + BRIEF, dispatcher.handle(&[])).await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the slow message ran twice"
    );
    expect_none(&driver, &[], vt + BRIEF).await;
    Outcome::Passed
}

/// Four consumers on one queue together receive each of 200 messages exactly once.
pub async fn concurrent_consumers_each_message_once<H: Harness>(h: &H, queue: &str) -> Outcome {
    let n = scaled(h, 200);
    let producer = open(h, queue).await;
    let mut sent = HashSet::new();
    for i in 0..n {
        let m = message("bulk", i);
        sent.insert(m.id().to_owned());
        send(&producer, &m, DEFAULT_PRIORITY).await;
    }
    let received: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut consumers = Vec::new();
    for _ in 0..4 {
        let driver = Arc::new(open(h, queue).await);
        let received = received.clone();
        consumers.push(tokio::spawn(async move {
            let give_up = Instant::now() + Duration::from_secs(120);
            while received.lock().unwrap().len() < n && Instant::now() < give_up {
                if let Some(d) = receive(&*driver, &[], Duration::from_millis(500)).await {
                    received.lock().unwrap().push(d.message().id().to_owned());
                    ack(&*driver, &d).await;
                }
            }
        }));
    }
    for consumer in consumers {
        consumer.await.expect("a consumer panicked");
    }
    let received = received.lock().unwrap();
    let unique: HashSet<_> = received.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        received.len(),
        "some message was delivered twice"
    );
    assert_eq!(unique, sent, "the messages received differ from those sent");
    Outcome::Passed
}

/// Input that cannot be decoded never reaches the caller as a message, is reported once, is
/// kept in quarantine, and the next message still arrives.
pub async fn undecodable_input_is_quarantined<H: Harness>(h: &H, queue: &str) -> Outcome {
    expect_each_quarantined(h, queue, &[b"{\"message\": not json, secret-token"]).await;
    Outcome::Passed
}

/// Pushes each of `inputs` raw, then a good message: each input is reported undecodable once,
/// with a short error that quotes no input, the good message is delivered, nothing comes back,
/// and the quarantine holds the inputs.
async fn expect_each_quarantined<H: Harness>(h: &H, queue: &str, inputs: &[&[u8]]) {
    let driver = open(h, queue).await;
    for bytes in inputs {
        h.push_raw(queue, bytes).await.expect("pushing raw bytes");
    }
    let good = message("good", 1);
    send(&driver, &good, DEFAULT_PRIORITY).await;
    let mut undecodable = 0;
    let mut delivered = Vec::new();
    for _ in 0..inputs.len() + 2 {
        match driver.receive(&[], PATIENCE).await {
            Ok(Some(d)) => {
                delivered.push(d.message().id().to_owned());
                ack(&driver, &d).await;
            }
            Ok(None) => break,
            Err(Error::Undecodable { source, .. }) => {
                let text = source.to_string();
                assert!(!text.contains("secret-token"), "the error quotes the input");
                assert!(text.len() < 400, "a long error: {text}");
                undecodable += 1;
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
        if undecodable == inputs.len() && delivered.len() == 1 {
            break;
        }
    }
    assert_eq!(
        undecodable,
        inputs.len(),
        "each undecodable input is reported once"
    );
    assert_eq!(delivered, [good.id().to_owned()]);
    let wait = if driver.capabilities().at_least_once {
        h.visibility_timeout() + BRIEF
    } else {
        BRIEF
    };
    expect_none(&driver, &[], wait).await;
    assert_eq!(
        h.quarantined(queue).await.expect("counting the quarantine"),
        inputs.len()
    );
}

/// A receive on an empty queue returns `None` within its wait (plus a little).
pub async fn empty_receive_returns_within_wait<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    for wait in [Duration::ZERO, Duration::from_secs(1)] {
        let start = Instant::now();
        expect_none(&driver, &[], wait).await;
        let took = start.elapsed();
        assert!(
            took <= wait + Duration::from_millis(1500),
            "a {wait:?} receive took {took:?}"
        );
    }
    Outcome::Passed
}

/// A 200 KB payload arrives whole (or is refused as too large by a driver that declares a
/// smaller limit).
pub async fn large_payload_round_trip<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let blob: String = (0..200_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let sent = Message::builder("large")
        .payload(&json!({ "blob": blob }))
        .build()
        .unwrap();
    if driver
        .capabilities()
        .max_payload
        .is_some_and(|max| max < 200_200)
    {
        return Outcome::Skipped("the driver's payload limit is below 200 KB".into());
    }
    send(&driver, &sent, DEFAULT_PRIORITY).await;
    let d = expect_one(&driver, &[]).await;
    assert_eq!(d.message(), &sent);
    ack(&driver, &d).await;
    Outcome::Passed
}

/// A message over the driver's declared limit is refused with `PayloadTooLarge`, and the
/// queue goes on working.
pub async fn oversized_payload_rejected<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let Some(max) = driver.capabilities().max_payload else {
        return Outcome::lacks("max_payload");
    };
    let sent = Message::builder("huge")
        .payload(&json!({ "blob": "x".repeat(max + 1) }))
        .build()
        .unwrap();
    let err = driver.send(&sent, DEFAULT_PRIORITY).await.unwrap_err();
    assert!(matches!(err, Error::PayloadTooLarge { .. }), "{err}");
    expect_none(&driver, &[], Duration::from_millis(300)).await;
    let after = message("after", 1);
    send(&driver, &after, DEFAULT_PRIORITY).await;
    let d = expect_one(&driver, &[]).await;
    assert_eq!(d.message().id(), after.id());
    ack(&driver, &d).await;
    Outcome::Passed
}

/// Payloads, types and ids in any script, with quotes, slashes and control characters, arrive
/// unchanged.
pub async fn unicode_payload_round_trip<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let sent = Message::builder("typ-é/\"ü\"")
        .id("id-žluťoučký-😀")
        .payload(&json!({
            "sk": "Žltý kôň úpel ďábelské ódy",
            "emoji": "😀👍🏽🇸🇰",
            "cjk": "漢字かなカナ한국어",
            "rtl": "שלום مرحبا",
            "tricky": "a/b\\c\"d\u{0}\u{1f}\u{7f}\u{2028}",
            "ключ": ["ünïcödé", 1.5, -0.25, 1e-7, 12345678901234567i64],
        }))
        .build()
        .unwrap();
    send(&driver, &sent, DEFAULT_PRIORITY).await;
    let d = expect_one(&driver, &[]).await;
    assert_eq!(d.message(), &sent);
    ack(&driver, &d).await;
    Outcome::Passed
}

/// Dropping `receive` futures at any point, waiting or not, loses no message.
pub async fn dropped_receive_loses_nothing<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    // A receive dropped while waiting on an empty queue.
    let _ = tokio::time::timeout(Duration::from_millis(200), driver.receive(&[], PATIENCE)).await;
    let sent = message("survivor", 1);
    send(&driver, &sent, DEFAULT_PRIORITY).await;
    // Receives dropped at ever later points of their work.
    let mut got = Vec::new();
    for step in 0..40u64 {
        let cut = Duration::from_micros(step * step * 40);
        if let Ok(result) = tokio::time::timeout(cut, driver.receive(&[], PATIENCE)).await
            && let Some(d) = result.expect("receiving")
        {
            got.push(d.message().id().to_owned());
            ack(&driver, &d).await;
        }
    }
    if got.is_empty() {
        let wait = if driver.capabilities().at_least_once {
            h.visibility_timeout() * 3 + PATIENCE
        } else {
            PATIENCE
        };
        let d = receive(&driver, &[], wait)
            .await
            .expect("the message was lost");
        got.push(d.message().id().to_owned());
        ack(&driver, &d).await;
    }
    assert_eq!(got, [sent.id().to_owned()]);
    Outcome::Passed
}

/// A message sent by one instance is received by another.
pub async fn sent_by_one_received_by_another<H: Harness>(h: &H, queue: &str) -> Outcome {
    let sender = open(h, queue).await;
    let receiver = open(h, queue).await;
    let sent = message("handover", 1);
    send(&sender, &sent, DEFAULT_PRIORITY).await;
    let d = expect_one(&receiver, &[]).await;
    assert_eq!(d.message(), &sent);
    ack(&receiver, &d).await;
    Outcome::Passed
}

/// The emitter and a dispatcher at concurrency 4 over `Arc<dyn Driver>`: every emitted message
/// is handled once.
pub async fn dispatcher_handles_emitted_messages<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver: Arc<dyn Driver> = Arc::new(open(h, queue).await);
    let n = scaled(h, 40);
    let emitter = Emitter::from_arc(driver.clone());
    let mut sent = HashSet::new();
    for i in 0..n {
        let m = message("job", i);
        sent.insert(m.id().to_owned());
        emitter.emit(&m, DEFAULT_PRIORITY).await.expect("emit");
    }
    let handled: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut dispatcher = Dispatcher::from_arc(driver.clone())
        .concurrency(4)
        .max_items(n as u64);
    let record = handled.clone();
    dispatcher.register_handler(
        "job",
        Arc::new(handler_fn(move |m: Message| {
            let record = record.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                record.lock().unwrap().push(m.id().to_owned());
                Ok(true)
            }
        })),
    );
    tokio::time::timeout(Duration::from_secs(120), dispatcher.handle(&[]))
        .await
        .expect("the dispatcher did not finish")
        .expect("the dispatcher failed");
    let handled = handled.lock().unwrap();
    let unique: HashSet<_> = handled.iter().cloned().collect();
    assert_eq!(unique.len(), handled.len(), "a message was handled twice");
    assert_eq!(unique, sent);
    Outcome::Passed
}

/// `send_batch` has the outcome of one `send` per message: a batch of 25 to the default queue
/// (one of them due in 2 s) and a smaller one to the `-high` queue each arrive once with every
/// field intact, the high ones first (in batch order on FIFO drivers), the delayed one not
/// before it is due; an empty batch is `Ok`.
pub async fn send_batch_delivers_each<H: Harness>(h: &H, queue: &str) -> Outcome {
    let (driver, second) = match open_with_priorities(h, queue).await {
        Some(driver) => (driver, HIGH),
        None => (open(h, queue).await, DEFAULT_PRIORITY),
    };
    let caps = driver.capabilities();
    driver
        .send_batch(&[], DEFAULT_PRIORITY)
        .await
        .expect("sending an empty batch");

    let build = |tag: &str, i: usize, delayed: bool| {
        let builder = Message::builder(format!("batch-{tag}"))
            .id(format!("{tag}-{i}-{queue}"))
            .payload(&json!({"z": i, "a": [tag, 2.5], "m": {"k": null}}))
            .created(1637617498.172724 + i as f64)
            .retries(i as u32 % 3);
        let builder = if delayed {
            builder.delay(Duration::from_secs(2))
        } else if i % 4 == 1 {
            builder.execute_at(unix_now() - 5.0) // due already: not delayed
        } else {
            builder
        };
        builder.build().expect("a valid message")
    };
    let n = scaled(h, 25);
    let delayed_at = caps.delay.then_some(n / 2);
    let first: Vec<Message> = (0..n)
        .map(|i| build("default", i, Some(i) == delayed_at))
        .collect();
    let m = scaled(h, 5);
    let high: Vec<Message> = (0..m).map(|i| build("high", i, false)).collect();
    driver
        .send_batch(&first, DEFAULT_PRIORITY)
        .await
        .unwrap_or_else(|e| panic!("sending a batch of {n}: {e}"));
    driver
        .send_batch(&high, second)
        .await
        .unwrap_or_else(|e| panic!("sending a batch of {m} to priority {second}: {e}"));

    let mut got: Vec<(Message, Priority)> = Vec::new();
    for _ in 0..n + m {
        let d = expect_one(&driver, &[]).await;
        let now = unix_now();
        if let Some(due) = d.message().execute_at() {
            assert!(
                now >= due - 0.001,
                "#{} delivered {:.3}s early",
                d.message().id(),
                due - now
            );
        }
        got.push((d.message().clone(), d.priority()));
        ack(&driver, &d).await;
    }
    expect_none(&driver, &[], BRIEF).await;

    let ids: HashSet<&str> = got.iter().map(|(m, _)| m.id()).collect();
    assert_eq!(ids.len(), got.len(), "a message was delivered twice");
    for (sent, priority) in first
        .iter()
        .map(|m| (m, DEFAULT_PRIORITY))
        .chain(high.iter().map(|m| (m, second)))
    {
        let (received, on) = got
            .iter()
            .find(|(m, _)| m.id() == sent.id())
            .unwrap_or_else(|| panic!("#{} was not delivered", sent.id()));
        assert_eq!(received, sent, "a field changed");
        assert_eq!(*on, priority, "#{} came from another priority", sent.id());
    }
    if second == HIGH {
        let order: Vec<Priority> = got.iter().map(|(_, p)| *p).collect();
        assert!(
            order[..m].iter().all(|p| *p == HIGH),
            "the high batch comes first: {order:?}"
        );
    }
    if caps.fifo {
        // Each batch in its order, counting the messages without `execute_at` (some drivers
        // order by due time, and `created` grows with the batch order).
        let in_order = |messages: Vec<&Message>| -> Vec<String> {
            messages
                .into_iter()
                .filter(|m| m.execute_at().is_none())
                .map(|m| m.id().to_owned())
                .collect()
        };
        for batch in [&first, &high] {
            let tag = batch[0].message_type();
            let received = got
                .iter()
                .map(|(m, _)| m)
                .filter(|m| m.message_type() == tag);
            assert_eq!(
                in_order(received.collect()),
                in_order(batch.iter().collect()),
                "a batch came out of order"
            );
        }
    }
    Outcome::Passed
}

/// A body put on the queue directly, as a foreign producer or an emitter that ignores delays
/// would, whose `execute_at` is still ahead, is not delivered before it is due, then once.
pub async fn raw_body_due_later_waits<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    if !driver.capabilities().delay {
        return Outcome::lacks("delay");
    }
    let early = Message::builder("raw-early")
        .delay(Duration::from_millis(2500))
        .build()
        .unwrap();
    let due = early.execute_at().unwrap();
    let body = JsonSerializer.serialize(&early).expect("encoding");
    h.push_raw(queue, &body).await.expect("pushing raw bytes");
    let now = message("raw-now", 1);
    send(&driver, &now, DEFAULT_PRIORITY).await;
    let first = expect_one(&driver, &[]).await;
    assert_eq!(
        first.message().id(),
        now.id(),
        "the due message comes first"
    );
    ack(&driver, &first).await;
    let d = receive(&driver, &[], PATIENCE)
        .await
        .expect("the early body was never delivered");
    let at = unix_now();
    assert_eq!(d.message().id(), early.id());
    assert!(
        at >= due - 0.001,
        "delivered {:.3}s before it was due",
        due - at
    );
    ack(&driver, &d).await;
    expect_none(&driver, &[], BRIEF).await;
    Outcome::Passed
}

/// A message due after the year 9999 is refused with `InvalidMessage` (no backend orders such
/// times), and nothing is sent.
pub async fn due_time_past_year_9999_refused<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let wire = format!(
        r#"{{"message":{{"id":"far-{queue}","type":"far","created":1700000000,"payload":null,"execute_at":1e300,"retries":0}}}}"#
    );
    let far = JsonSerializer
        .deserialize(wire.as_bytes())
        .expect("a decodable message");
    for result in [
        driver.send(&far, DEFAULT_PRIORITY).await,
        driver
            .send_batch(std::slice::from_ref(&far), DEFAULT_PRIORITY)
            .await,
    ] {
        let err = result.expect_err("a due time after 9999 was accepted");
        assert!(matches!(err, Error::InvalidMessage(_)), "{err}");
    }
    let after = message("after", 1);
    send(&driver, &after, DEFAULT_PRIORITY).await;
    let d = expect_one(&driver, &[]).await;
    assert_eq!(d.message().id(), after.id());
    ack(&driver, &d).await;
    expect_none(&driver, &[], Duration::from_millis(300)).await;
    Outcome::Passed
}

/// A delivery whose lease expired and whose message went to another instance is acknowledged,
/// given back and extended late by the first instance: the other instance's copy stays claimed
/// (no third instance gets it), and is still delivered again, on time, when that instance
/// vanishes.
pub async fn late_settle_leaves_the_redelivered_copy<H: Harness>(h: &H, queue: &str) -> Outcome {
    let first = open(h, queue).await;
    if !first.capabilities().at_least_once || !first.capabilities().extend {
        return Outcome::lacks("at_least_once and extend");
    }
    let second = open(h, queue).await;
    let third = open(h, queue).await;
    let vt = h.visibility_timeout();
    let sent = message("late", 1);
    send(&first, &sent, DEFAULT_PRIORITY).await;
    let stale = expect_one(&first, &[]).await;
    let copy = receive(&second, &[], vt * 3 + PATIENCE)
        .await
        .expect("the expired claim was not delivered again");
    assert_eq!(copy.message().id(), sent.id());
    second.extend(&copy, vt * 3).await.expect("extend");
    // Late, on the expired lease: each may fail or not, but must leave the copy alone.
    let _ = first.ack(&stale).await;
    let _ = first.nack(&stale).await;
    let _ = first.extend(&stale, vt * 20).await;
    drop(stale);
    drop(first);
    expect_none(&third, &[], vt).await;
    // The second instance vanishes: its copy comes back, as a claim never acknowledged does.
    drop(copy);
    drop(second);
    let again = receive(&third, &[], vt * 6 + PATIENCE)
        .await
        .expect("a late ack or extend of the expired lease removed or kept the copy's claim");
    assert_eq!(again.message().id(), sent.id());
    ack(&third, &again).await;
    expect_none(&third, &[], vt + BRIEF).await;
    Outcome::Passed
}

/// An instance busy with one message for 2.5 visibility timeouts, without asking for more,
/// holds no other message hostage: a second instance gets the rest once their claims could
/// have expired, and when the busy instance asks again it gets none of them, while the second
/// instance still holds them, nor after. Every message is delivered to one instance only.
pub async fn busy_instance_does_not_run_others_twice<H: Harness>(h: &H, queue: &str) -> Outcome {
    let busy = open(h, queue).await;
    if !busy.capabilities().at_least_once || !busy.capabilities().extend {
        return Outcome::lacks("at_least_once and extend");
    }
    let other = open(h, queue).await;
    let vt = h.visibility_timeout();
    let sent: Vec<Message> = (0..4).map(|i| message("held", i)).collect();
    driver_send_all(&busy, &sent).await;
    let slow = expect_one(&busy, &[]).await;
    let mut seen = vec![slow.message().id().to_owned()];
    let mut held = Vec::new();
    let until = Instant::now() + vt * 2 + vt / 2;
    while held.len() < sent.len() - 1 {
        busy.extend(&slow, vt).await.expect("extend");
        let step = (vt / 2).min(until.saturating_duration_since(Instant::now()));
        if let Some(d) = receive(&other, &[], step.max(Duration::from_millis(50))).await {
            seen.push(d.message().id().to_owned());
            held.push(d);
        } else if Instant::now() >= until + vt * 3 + PATIENCE {
            panic!(
                "only {} of {} messages reached the second instance",
                held.len(),
                sent.len() - 1
            );
        }
    }
    while Instant::now() < until {
        busy.extend(&slow, vt).await.expect("extend");
        for d in &held {
            other.extend(d, vt).await.expect("extend");
        }
        tokio::time::sleep(vt / 4).await;
    }
    for d in &held {
        other.extend(d, vt).await.expect("extend");
    }
    if let Some(d) = receive(&busy, &[], Duration::from_millis(300)).await {
        panic!(
            "#{} went to the busy instance while the second one holds it",
            d.message().id()
        );
    }
    for d in &held {
        ack(&other, d).await;
    }
    ack(&busy, &slow).await;
    expect_none(&busy, &[], vt + BRIEF).await;
    expect_none(&other, &[], BRIEF).await;
    seen.sort();
    let mut ids: Vec<String> = sent.iter().map(|m| m.id().to_owned()).collect();
    ids.sort();
    assert_eq!(seen, ids, "each message once");
    Outcome::Passed
}

async fn driver_send_all(driver: &impl Driver, messages: &[Message]) {
    for m in messages {
        send(driver, m, DEFAULT_PRIORITY).await;
    }
}

/// Hostile bodies put on the queue directly (invalid UTF-8, nesting 100,000 deep, wrong field
/// types, a number out of range, a top level that is not an object) never reach a handler and
/// stop nothing: each is reported undecodable and quarantined, and the good message behind them
/// is delivered.
pub async fn hostile_inputs_are_quarantined<H: Harness>(h: &H, queue: &str) -> Outcome {
    let deep = format!(
        r#"{{"message":{{"id":"deep","type":"t","created":1,"payload":{}1{}}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let hostile: [&[u8]; 6] = [
        b"\xff\xfe{\"message\": not json",
        deep.as_bytes(),
        br#"{"message":{"id":5,"type":"t","created":1}}"#,
        br#"{"message":{"id":"a","type":{"x":1},"created":1}}"#,
        br#"{"message":{"id":"a","type":"t","created":1e400}}"#,
        br#"[{"message":{"id":"a","type":"t","created":1}}]"#,
    ];
    expect_each_quarantined(h, queue, &hostile).await;
    Outcome::Passed
}
