//! The SQS driver against plain SDK clients, delays longer than SQS allows, priorities without
//! a long poll per empty queue, batched sends, batches given back on shutdown, the quarantine,
//! and a server that cannot be reached.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{client, count, open, options, queue_url, sqs_or_skip, take_raw};
use hermes_core::time::unix_now;
use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, Driver, Error, JsonSerializer, Message, Serializer,
};
use hermes_sqs::aws_sdk_sqs::Client;
use hermes_sqs::aws_sdk_sqs::config::interceptors::BeforeSerializationInterceptorContextMut;
use hermes_sqs::aws_sdk_sqs::config::{ConfigBag, Intercept, RuntimeComponents};
use hermes_sqs::aws_sdk_sqs::operation::send_message::SendMessageInput;
use hermes_sqs::aws_sdk_sqs::operation::send_message_batch::SendMessageBatchInput;
use hermes_sqs::{SqsDriver, SqsOptions, quarantine_queue};
use hermes_testkit::suite::unique_queue_name;

const PHP_JSON: &str = r#"{"message":{"id":"php-1","type":"send-email","created":1637617498.172724,"payload":{"to":"a\/b@x.sk","name":"\u017dlt\u00fd k\u00f4\u0148"},"execute_at":null,"retries":0}}"#;

/// Sends `body` to the queue called `queue` with the plain SDK, as a PHP emitter would.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delay_longer_than_the_cap_waits_until_due() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("long-delay");
    let mut options = options();
    options.max_delay = Duration::from_secs(2); // stands in for SQS's 900 s
    let driver = open(&queue, options).await;
    let delayed = Message::builder("later")
        .delay(Duration::from_secs(5))
        .build()
        .unwrap();
    let due = delayed.execute_at().unwrap();
    driver.send(&delayed, DEFAULT_PRIORITY).await.unwrap();

    let d = driver
        .receive(&[], Duration::from_secs(15))
        .await
        .unwrap()
        .expect("the delayed message, once due");
    let now = unix_now();
    assert_eq!(d.message(), &delayed, "the copies sent again are unchanged");
    assert!(now >= due - 0.001, "delivered {:.3}s early", due - now);
    assert!(now < due + 3.0, "delivered {:.3}s late", now - due);
    driver.ack(&d).await.unwrap();
    assert_eq!(count(&client().await, &queue).await, 0, "no copy is left");
    assert_eq!(
        count(&client().await, &hermes_sqs::delay_queue(&queue)).await,
        0,
        "nothing is left in the delay queue"
    );
    common::cleanup(&queue).await;
}

/// A delay longer than SQS allows keeps the message out of its queue until the last stretch:
/// a plain consumer of the queue (as a PHP worker is) never gets it before it is due, while a
/// Rust worker of another priority moves it on from the delay queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_consumer_never_gets_a_long_delay_early() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("long-plain");
    let mut options = options();
    options.max_delay = Duration::from_secs(2); // stands in for SQS's 900 s
    let driver = open(&queue, options).await;
    driver
        .setup_priority_queue(&format!("{queue}-high"), 200)
        .unwrap();
    let delayed = Message::builder("later")
        .delay(Duration::from_secs(6))
        .build()
        .unwrap();
    let due = delayed.execute_at().unwrap();
    driver.send(&delayed, DEFAULT_PRIORITY).await.unwrap();
    // A Rust worker of the high queue only: it moves delayed messages on, and takes none.
    let worker = {
        let driver = driver.clone();
        tokio::spawn(async move {
            while driver
                .receive(&[200], Duration::from_secs(1))
                .await
                .unwrap()
                .is_none()
            {}
        })
    };
    let client = client().await;
    let mut arrived = None;
    let give_up = Instant::now() + Duration::from_secs(20);
    while arrived.is_none() && Instant::now() < give_up {
        let bodies = take_raw(&client, &queue, 10).await;
        let now = unix_now();
        if !bodies.is_empty() {
            assert_eq!(
                bodies,
                [String::from_utf8(JsonSerializer.serialize(&delayed).unwrap()).unwrap()]
            );
            arrived = Some(now);
        }
    }
    worker.abort();
    let arrived = arrived.expect("the long delay never reached the queue");
    assert!(
        arrived >= due - 0.001,
        "a plain consumer got it {:.3}s early",
        due - arrived
    );
    assert!(arrived < due + 3.0, "{:.3}s late", arrived - due);
    common::cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_message_from_a_plain_client_waits_until_due() {
    if !sqs_or_skip().await {
        return;
    }
    // PHP Hermes sends `execute_at` without a delay: the worker delays it.
    let queue = unique_queue_name("php-delay");
    let due = unix_now() + 2.0;
    let body = PHP_JSON.replace(r#""execute_at":null"#, &format!(r#""execute_at":{due}"#));
    send_raw(&client().await, &queue, &body).await;
    let driver = open(&queue, options()).await;
    let d = driver
        .receive(&[], Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the delayed message, once due");
    assert_eq!(d.message().id(), "php-1");
    assert!(unix_now() >= due - 0.001, "delivered early");
    driver.ack(&d).await.unwrap();
    common::cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_higher_queues_cost_no_long_poll_each() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("priorities");
    let mut options = options();
    options.wait_time = Duration::from_secs(5);
    let driver = open(&queue, options).await;
    for (name, priority) in [("high", 300), ("mid", 200), ("low", 50)] {
        driver
            .setup_priority_queue(&format!("{queue}-{name}"), priority)
            .unwrap();
    }
    // A message on the lowest queue, the others empty: found at once.
    driver.send(&Message::new("low"), 50).await.unwrap();
    driver.queue_url(DEFAULT_PRIORITY).await.unwrap(); // created, empty
    let start = Instant::now();
    let d = driver
        .receive(&[], Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the low message");
    assert_eq!((d.message().message_type(), d.priority()), ("low", 50));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "took {:?}",
        start.elapsed()
    );
    driver.ack(&d).await.unwrap();

    // While every queue is empty, a message arriving on any of them ends the wait.
    let sender = driver.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        sender.send(&Message::new("mid"), 200).await.unwrap();
    });
    let start = Instant::now();
    let d = driver
        .receive(&[], Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the mid message");
    assert_eq!((d.message().message_type(), d.priority()), ("mid", 200));
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "took {:?}",
        start.elapsed()
    );
    driver.ack(&d).await.unwrap();
    driver.flush().await.unwrap();
    common::cleanup(&queue).await;
    for name in ["high", "mid"] {
        common::delete_queue(&client().await, &format!("{queue}-{name}")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_handed_out_one_by_one_and_the_rest_given_back_on_shutdown() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("batch");
    let mut options = options();
    // Long enough that a message not given back would not come back during the test.
    options.visibility_timeout = Some(Duration::from_secs(60));
    let driver = open(&queue, options.clone()).await;
    let mut sent = Vec::new();
    for i in 0..5 {
        let m = Message::builder("job")
            .payload(&serde_json::json!({ "n": i }))
            .build()
            .unwrap();
        driver.send(&m, DEFAULT_PRIORITY).await.unwrap();
        sent.push(m.id().to_owned());
    }

    // A worker handles two and is shut down.
    let (recorder, handled) = hermes_testkit::recording_handler();
    let mut dispatcher = Dispatcher::new(driver.clone()).max_items(2);
    dispatcher.register_handler("job", recorder);
    dispatcher.handle(&[]).await.unwrap();
    assert_eq!(handled.lock().unwrap().len(), 2);

    // Another instance gets the other three at once, not after the visibility timeout.
    let other = open(&queue, options).await;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) && handled.lock().unwrap().len() < 5 {
        if let Some(d) = other.receive(&[], Duration::from_secs(1)).await.unwrap() {
            handled.lock().unwrap().push(d.message().id().to_owned());
            other.ack(&d).await.unwrap();
        }
    }
    let mut handled = handled.lock().unwrap().clone();
    handled.sort();
    sent.sort();
    assert_eq!(handled, sent, "each message once, none held back");
    other.flush().await.unwrap();
    common::cleanup(&queue).await;
}

/// One send request a client made: `SendMessage`, or `SendMessageBatch` with the
/// `DelaySeconds` of each entry.
#[derive(Debug, Clone, PartialEq)]
enum SendRequest {
    Single,
    Batch(Vec<Option<i32>>),
}

/// Records the send requests of a client, and makes SQS refuse some: the entries with the ids
/// in `refuse` of the next `SendMessageBatch`, and every `SendMessage` while `refuse_alone`,
/// get a `DelaySeconds` over SQS's limit of 900.
#[derive(Debug, Clone, Default)]
struct Sends {
    log: Arc<Mutex<Vec<SendRequest>>>,
    refuse: Arc<Mutex<Vec<&'static str>>>,
    refuse_alone: Arc<AtomicBool>,
}

impl Sends {
    fn take(&self) -> Vec<SendRequest> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    /// The number of entries of each request.
    fn sizes(&self) -> Vec<usize> {
        self.take()
            .iter()
            .map(|r| match r {
                SendRequest::Single => 1,
                SendRequest::Batch(delays) => delays.len(),
            })
            .collect()
    }
}

impl Intercept for Sends {
    fn name(&self) -> &'static str {
        "Sends"
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let input = context.input_mut();
        if let Some(batch) = input.downcast_mut::<SendMessageBatchInput>() {
            let entries = batch.entries.as_mut().expect("entries");
            self.log.lock().unwrap().push(SendRequest::Batch(
                entries.iter().map(|e| e.delay_seconds).collect(),
            ));
            let refuse = std::mem::take(&mut *self.refuse.lock().unwrap());
            for entry in entries
                .iter_mut()
                .filter(|e| refuse.contains(&e.id.as_str()))
            {
                entry.delay_seconds = Some(901);
            }
        } else if let Some(single) = input.downcast_mut::<SendMessageInput>() {
            self.log.lock().unwrap().push(SendRequest::Single);
            if self.refuse_alone.load(Ordering::SeqCst) {
                single.delay_seconds = Some(901);
            }
        }
        Ok(())
    }
}

/// A driver on `queue` whose client records its send requests.
async fn recording(queue: &str, options: SqsOptions) -> (SqsDriver, Sends) {
    let sends = Sends::default();
    let client = common::client_with(sends.clone()).await;
    (
        SqsDriver::with_options(client, queue, options).unwrap(),
        sends,
    )
}

/// Takes `n` bodies from the queue called `queue` with the plain SDK (waiting up to 15 s),
/// sorted.
async fn take_all_raw(client: &Client, queue: &str, n: usize) -> Vec<String> {
    let start = Instant::now();
    let mut bodies = Vec::new();
    while bodies.len() < n && start.elapsed() < Duration::from_secs(15) {
        bodies.extend(take_raw(client, queue, 10).await);
    }
    bodies.sort();
    bodies
}

/// The bodies Hermes' JSON gives `messages`, sorted.
fn encoded(messages: &[Message]) -> Vec<String> {
    let mut bodies: Vec<String> = messages
        .iter()
        .map(|m| String::from_utf8(JsonSerializer.serialize(m).unwrap()).unwrap())
        .collect();
    bodies.sort();
    bodies
}

fn numbered(n: usize, pad: usize) -> Vec<Message> {
    (0..n)
        .map(|i| {
            Message::builder("job")
                .payload(&serde_json::json!({ "n": i, "text": "ž".repeat(pad) }))
                .build()
                .unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_goes_ten_per_request_each_message_with_its_own_delay() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("send-batch");
    let (driver, sends) = recording(&queue, options()).await;
    let mut messages = numbered(23, 1);
    messages[4] = Message::builder("job")
        .id("delayed")
        .delay(Duration::from_secs(2))
        .build()
        .unwrap();
    messages[6] = Message::builder("job")
        .id("due-already")
        .execute_at(unix_now() - 5.0)
        .build()
        .unwrap();
    driver
        .send_batch(&messages, DEFAULT_PRIORITY)
        .await
        .unwrap();
    let requests = sends.take();
    assert_eq!(requests.len(), 3, "{requests:?}");
    let delays: Vec<Option<i32>> = requests
        .iter()
        .flat_map(|r| match r {
            SendRequest::Batch(delays) => delays.clone(),
            SendRequest::Single => panic!("a message was sent alone: {requests:?}"),
        })
        .collect();
    assert_eq!(
        requests
            .iter()
            .map(|r| matches!(r, SendRequest::Batch(d) if d.len() == 10))
            .collect::<Vec<_>>(),
        [true, true, false]
    );
    for (i, delay) in delays.iter().enumerate() {
        if i == 4 {
            assert!(matches!(delay, Some(1 | 2)), "the delayed one: {delay:?}");
        } else {
            assert_eq!(*delay, None, "message {i} is due");
        }
    }

    let start = Instant::now();
    let sdk = client().await;
    assert_eq!(take_all_raw(&sdk, &queue, 23).await, encoded(&messages));
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "the delayed message came at once"
    );
    common::cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_split_by_size_and_an_oversized_message_sends_nothing() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("batch-size");
    let mut options = options();
    options.max_payload = 1000;
    let (driver, sends) = recording(&queue, options).await;

    // 12 messages, the last one too large: nothing is sent, not even the queue created.
    let mut messages = numbered(12, 1);
    messages[11] = numbered(1, 200).remove(0);
    let err = driver
        .send_batch(&messages, DEFAULT_PRIORITY)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::PayloadTooLarge { max: 1000, .. }),
        "{err}"
    );
    assert_eq!(sends.take(), []);
    let sdk = client().await;
    assert!(
        sdk.get_queue_url().queue_name(&queue).send().await.is_err(),
        "the queue was created"
    );

    // Bodies of 251 to 333 bytes: three per request of at most 1000.
    let messages = numbered(7, 25);
    let size = JsonSerializer.serialize(&messages[0]).unwrap().len();
    assert!((251..=333).contains(&size), "a body of {size} bytes");
    driver
        .send_batch(&messages, DEFAULT_PRIORITY)
        .await
        .unwrap();
    assert_eq!(sends.sizes(), [3, 3, 1]);
    assert_eq!(take_all_raw(&sdk, &queue, 7).await, encoded(&messages));
    common::cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_sqs_refuses_is_sent_again_alone_once() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("batch-refused");
    let (driver, sends) = recording(&queue, options()).await;
    let sdk = client().await;

    // Refused in the batch, taken alone.
    let messages = numbered(5, 1);
    sends.refuse.lock().unwrap().push("2");
    driver
        .send_batch(&messages, DEFAULT_PRIORITY)
        .await
        .unwrap();
    assert_eq!(
        sends.take(),
        [SendRequest::Batch(vec![None; 5]), SendRequest::Single]
    );
    assert_eq!(take_all_raw(&sdk, &queue, 5).await, encoded(&messages));

    // Refused alone too: the error, and the others of the request were sent.
    let messages = numbered(3, 1);
    sends.refuse.lock().unwrap().push("1");
    sends.refuse_alone.store(true, Ordering::SeqCst);
    let err = driver
        .send_batch(&messages, DEFAULT_PRIORITY)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Driver { .. }) && err.to_string().contains("SendMessage:"),
        "{err}"
    );
    assert_eq!(
        sends.take(),
        [SendRequest::Batch(vec![None; 3]), SendRequest::Single]
    );
    assert_eq!(
        take_all_raw(&sdk, &queue, 2).await,
        encoded(&[messages[0].clone(), messages[2].clone()])
    );
    common::cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_ends_a_long_poll_promptly() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("shutdown");
    let driver = open(&queue, options()).await;
    driver.queue_url(DEFAULT_PRIORITY).await.unwrap();
    let dispatcher = Dispatcher::new(driver);
    let token = dispatcher.cancellation_token();
    let worker = tokio::spawn(async move { dispatcher.handle(&[]).await });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let start = Instant::now();
    token.cancel();
    worker.await.unwrap().unwrap();
    assert!(
        start.elapsed() < Duration::from_millis(1500),
        "took {:?}",
        start.elapsed()
    );
    common::cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_body_moves_unchanged_to_the_quarantine() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("quarantine");
    let sdk = client().await;
    let garbage = r#"{"message":{"type":"no-id-nor-created"}}"#;
    send_raw(&sdk, &queue, garbage).await;
    let driver = open(&queue, options()).await;
    let err = driver
        .receive(&[], Duration::from_secs(5))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Undecodable { .. }), "{text}");
    assert!(text.contains(&quarantine_queue(&queue)), "{text}");
    assert!(
        !text.contains("no-id-nor-created"),
        "quotes the body: {text}"
    );
    assert_eq!(driver.quarantine_queue(), quarantine_queue(&queue));
    assert_eq!(
        take_raw(&sdk, &quarantine_queue(&queue), 10).await,
        [garbage]
    );
    assert_eq!(count(&sdk, &queue).await, 0, "deleted from the queue");
    common::cleanup(&queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_a_temporary_error() {
    // Nothing listens on port 1 of the loopback address.
    let config = hermes_sqs::aws_sdk_sqs::Config::builder()
        .behavior_version_latest()
        .region(hermes_sqs::aws_sdk_sqs::config::Region::new("us-east-1"))
        .credentials_provider(hermes_sqs::aws_sdk_sqs::config::Credentials::new(
            "AKIDTEST", "secret", None, None, "test",
        ))
        .endpoint_url("http://127.0.0.1:1")
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    let driver = SqsDriver::new(Client::from_conf(config), "hermes", Default::default()).unwrap();
    let err = tokio::time::timeout(
        Duration::from_secs(30),
        driver.send(&Message::new("t"), DEFAULT_PRIORITY),
    )
    .await
    .expect("an answer, not a hang")
    .unwrap_err();
    assert!(err.is_temporary(), "{err}");
    assert!(matches!(err, Error::Connection { .. }), "{err}");
    assert!(!err.to_string().contains("secret"), "{err}");
}

#[test]
fn names_and_options_outside_sqs_limits_are_refused() {
    let config = hermes_sqs::aws_sdk_sqs::Config::builder()
        .behavior_version_latest()
        .build();
    let client = Client::from_conf(config);
    for bad in ["jobs.fifo", "a/b", &"x".repeat(70)] {
        let err = SqsDriver::new(client.clone(), bad, Default::default()).unwrap_err();
        assert!(
            matches!(err, Error::InvalidQueueName { .. }),
            "{bad}: {err}"
        );
    }
    let driver = SqsDriver::new(client.clone(), &"x".repeat(69), Default::default()).unwrap();
    driver.setup_priority_queue(&"y".repeat(80), 5).unwrap();
    assert!(driver.setup_priority_queue(&"y".repeat(81), 5).is_err());
    assert!(driver.setup_priority_queue("a.b", 5).is_err());

    let mut wait = SqsOptions::default();
    wait.wait_time = Duration::from_secs(21);
    let mut batch = SqsOptions::default();
    batch.batch_size = 11;
    let mut delay = SqsOptions::default();
    delay.max_delay = Duration::from_secs(901);
    for options in [wait, batch, delay] {
        let err = SqsDriver::with_options(client.clone(), "jobs", options).unwrap_err();
        assert!(matches!(err, Error::Config { .. }), "{err}");
    }
}

#[test]
fn debug_output_names_the_queues_and_no_client_secrets() {
    let config = hermes_sqs::aws_sdk_sqs::Config::builder()
        .behavior_version_latest()
        .credentials_provider(hermes_sqs::aws_sdk_sqs::config::Credentials::new(
            "AKIDTEST",
            "very-secret",
            None,
            None,
            "test",
        ))
        .build();
    let driver = SqsDriver::new(Client::from_conf(config), "jobs", Default::default()).unwrap();
    let text = format!("{driver:?}");
    assert!(text.contains("jobs-quarantine"), "{text}");
    assert!(!text.contains("very-secret"), "{text}");
}

/// With a visibility timeout of zero, claims do not last, and an `ack` still deletes the message
/// (the fence against late acknowledgements needs a lease to apply).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_deletes_on_a_queue_without_visibility_timeout() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("no-visibility");
    let mut options = options();
    options.visibility_timeout = Some(Duration::ZERO);
    let driver = open(&queue, options).await;
    let m = Message::new("t");
    driver.send(&m, DEFAULT_PRIORITY).await.unwrap();
    let d = driver
        .receive(&[], Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.message().id(), m.id());
    driver.ack(&d).await.unwrap();
    driver.flush().await.unwrap();
    assert_eq!(
        count(&client().await, &queue).await,
        0,
        "the ack deleted it"
    );
    common::cleanup(&queue).await;
}

/// A queue deleted while the driver runs (or forgotten by a restarted test server) fails the
/// next call with a temporary error, so a worker waits it out instead of exiting; the call
/// after it creates the queue again, and sending and receiving go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_deleted_under_the_driver_is_temporary_and_created_again() {
    if !sqs_or_skip().await {
        return;
    }
    let queue = unique_queue_name("deleted");
    let driver = open(&queue, options()).await;
    driver
        .send(&Message::new("before"), DEFAULT_PRIORITY)
        .await
        .unwrap();
    let sdk = client().await;
    common::delete_queue(&sdk, &queue).await;

    let err = driver
        .receive(&[], Duration::from_secs(1))
        .await
        .expect_err("the queue is gone");
    assert!(err.is_temporary(), "{err}");
    assert!(err.to_string().contains("ReceiveMessage"), "{err}");

    let after = Message::new("after");
    driver.send(&after, DEFAULT_PRIORITY).await.unwrap();
    let delivery = driver
        .receive(&[], Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the message sent after the queue came back");
    assert_eq!(delivery.message().id(), after.id());
    driver.ack(&delivery).await.unwrap();
    driver.flush().await.unwrap();
    common::cleanup(&queue).await;
}
