//! Delays through the ladder of delay queues: a message reaches the queue no earlier than due,
//! for any consumer (here a plain AMQP client, as a PHP worker would be), shortly after it, and
//! the broker holds a bounded set of queues and exchanges whatever delays were sent.

mod common;

use std::time::Duration;

use common::{CLASSIC, amqp_url, declare_durable, publish_raw, rabbitmqctl, raw, ready};
use futures_util::StreamExt;
use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Driver, JsonSerializer, Message, Serializer};
use hermes_rabbitmq::{
    DELAY_LEVELS, RabbitMqDriver, RabbitMqOptions, delay_level, legacy_delay_queue,
    long_delay_queue,
};
use hermes_testkit::suite::{Harness, unique_queue_name};
use lapin::options::{BasicAckOptions, BasicConsumeOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};

/// Receives with `driver` the message `expected`, and checks it was not handed out early.
async fn expect_when_due(driver: &RabbitMqDriver, expected: &Message) {
    let d = driver
        .receive(&[], Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("#{} never arrived", expected.id()));
    let now = unix_now();
    let due = expected.execute_at().unwrap();
    assert_eq!(d.message().id(), expected.id());
    assert!(now >= due, "handed out {:.3} s early", due - now);
    driver.ack(&d).await.unwrap();
    driver.flush().await.unwrap();
}

/// Sends one message per delay while a plain client consumes the queue, and returns, per
/// message, how late (positive) or early (negative) it arrived, in milliseconds.
async fn lateness_at_a_plain_consumer(queue: &str, delays_ms: &[u64]) -> Vec<(u64, f64)> {
    let driver = RabbitMqDriver::new(&amqp_url(), queue, RabbitMqOptions::default()).unwrap();
    let connection = raw().await.unwrap();
    let channel = connection.create_channel().await.unwrap();
    declare_durable(&channel, queue).await;
    let mut consumer = channel
        .basic_consume(
            queue.into(),
            "plain".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    // Connected, and the ladder's levels declared, as in an emitter that ran before.
    let longest = delays_ms.iter().max().copied().unwrap_or(0);
    let warm_up = Message::builder("warm-up")
        .id("warm-up")
        .delay(Duration::from_millis(longest))
        .build()
        .unwrap();
    driver.send(&warm_up, DEFAULT_PRIORITY).await.unwrap();
    let expected = delays_ms.len();
    let longest = Duration::from_millis(longest) + Duration::from_secs(10);
    // Consumed while the messages are sent, so an arrival is seen when it happens.
    let consuming = tokio::spawn(async move {
        let mut arrivals = Vec::new();
        let mut warmed_up = false;
        while arrivals.len() < expected || !warmed_up {
            let delivery = tokio::time::timeout(longest, consumer.next())
                .await
                .expect("a delayed message never arrived")
                .unwrap()
                .unwrap();
            let arrived = unix_now();
            delivery
                .acker
                .ack(BasicAckOptions::default())
                .await
                .unwrap();
            let m = JsonSerializer.deserialize(&delivery.data).unwrap();
            assert!(
                arrived >= m.execute_at().unwrap(),
                "#{} arrived early",
                m.id()
            );
            match m.id().parse::<usize>() {
                Ok(i) => arrivals.push((i, (arrived - m.execute_at().unwrap()) * 1000.0)),
                Err(_) => warmed_up = true,
            }
        }
        arrivals
    });
    for (i, ms) in delays_ms.iter().enumerate() {
        let m = Message::builder("delayed")
            .id(format!("{i}"))
            .delay(Duration::from_millis(*ms))
            .build()
            .unwrap();
        driver.send(&m, DEFAULT_PRIORITY).await.unwrap();
    }
    let lateness = consuming
        .await
        .unwrap()
        .into_iter()
        .map(|(i, late)| (delays_ms[i], late))
        .collect();
    let _ = connection.close(200, "bye".into()).await;
    lateness
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_consumer_never_gets_a_delayed_message_early() {
    let queue = unique_queue_name("ladder");
    let delays = [10, 25, 90, 333, 1_000, 2_500, 3_000, 5_120, 7_300];
    let mut lateness = lateness_at_a_plain_consumer(&queue, &delays).await;
    CLASSIC.cleanup(&queue).await;
    lateness.sort_by(|a, b| a.1.total_cmp(&b.1));
    println!("delay ms, lateness ms: {lateness:?}");
    for (delay, late) in &lateness {
        assert!(
            *late >= 0.0,
            "a {delay} ms delay arrived {:.1} ms early",
            -late
        );
        assert!(
            *late <= 250.0,
            "a {delay} ms delay arrived {late:.1} ms late"
        );
    }
    let median = lateness[lateness.len() / 2].1;
    assert!(median < 50.0, "median lateness {median:.1} ms");
}

/// A delay of a year, longer than the ladder holds (about 62 days), goes down the whole ladder
/// towards the long-delay queue: it waits in the top level, not in the queue, and only the
/// ladder's levels are declared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_year_long_delay_waits_in_the_ladder() {
    let queue = unique_queue_name("year");
    let driver = RabbitMqDriver::new(&amqp_url(), &queue, RabbitMqOptions::default()).unwrap();
    let year = Duration::from_secs(365 * 24 * 3600);
    let m = Message::builder("next-year").delay(year).build().unwrap();
    driver.send(&m, DEFAULT_PRIORITY).await.unwrap();
    assert_eq!(ready(&queue).await, 0, "not in the queue before it is due");
    let top = delay_level(&queue, DELAY_LEVELS - 1);
    assert_eq!(ready(&top).await, 1, "in the top level of the ladder");
    let listed = rabbitmqctl(&["list_queues", "-q", "--no-table-headers", "name"]);
    let levels = listed
        .lines()
        .filter(|l| l.trim().starts_with(&format!("{queue}.delay.level")))
        .count();
    assert_eq!(levels, DELAY_LEVELS);
    CLASSIC.cleanup(&queue).await;
}

/// What reaches the long-delay queue (after a trip down the whole ladder) is sent on by a
/// worker: down the ladder again while it is not due, so it never reaches the queue early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_sends_long_delays_on_down_the_ladder() {
    let queue = unique_queue_name("long");
    let driver = CLASSIC.open(&queue).await.unwrap();
    // Declares the queue and its ladder.
    let warm_up = Message::builder("warm-up")
        .delay(Duration::from_millis(10))
        .build()
        .unwrap();
    driver.send(&warm_up, DEFAULT_PRIORITY).await.unwrap();
    let d = driver
        .receive(&[], Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    driver.ack(&d).await.unwrap();
    let soon = Message::builder("soon")
        .delay(Duration::from_millis(1500))
        .build()
        .unwrap();
    let later = Message::builder("later")
        .delay(Duration::from_secs(200 * 24 * 3600))
        .build()
        .unwrap();
    for m in [&soon, &later] {
        publish_raw(
            &long_delay_queue(&queue),
            &JsonSerializer.serialize(m).unwrap(),
        )
        .await;
    }
    expect_when_due(&driver, &soon).await;
    assert_eq!(ready(&long_delay_queue(&queue)).await, 0);
    assert_eq!(ready(&queue).await, 0);
    assert_eq!(
        ready(&delay_level(&queue, DELAY_LEVELS - 1)).await,
        1,
        "the later one"
    );
    CLASSIC.cleanup(&queue).await;
}

/// However many different delays are sent, the queue has at most one exchange and one queue
/// per level.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declared_queues_and_exchanges_are_bounded() {
    let queue = unique_queue_name("bounded");
    let driver = RabbitMqDriver::new(&amqp_url(), &queue, RabbitMqOptions::default()).unwrap();
    for i in 0..300u64 {
        // Spread from 10 ms to about 35 years.
        let secs = 0.01 * 1.088f64.powi(i as i32) + i as f64 * 1e-3;
        let m = Message::builder("t")
            .delay(Duration::from_secs_f64(secs))
            .build()
            .unwrap();
        driver.send(&m, DEFAULT_PRIORITY).await.unwrap();
    }
    let prefix = format!("{queue}.");
    let count = |listing: String| {
        listing
            .lines()
            .filter(|l| l.trim().starts_with(&prefix))
            .count()
    };
    let queues = count(rabbitmqctl(&[
        "list_queues",
        "-q",
        "--no-table-headers",
        "name",
    ]));
    let exchanges = count(rabbitmqctl(&[
        "list_exchanges",
        "-q",
        "--no-table-headers",
        "name",
    ]));
    println!("300 delays: {queues} delay queues, {exchanges} exchanges");
    // One queue and one exchange per level, the long-delay queue and the arrival exchange.
    assert!(queues <= DELAY_LEVELS + 1, "{queues} queues");
    assert!(exchanges <= DELAY_LEVELS + 1, "{exchanges} exchanges");
    CLASSIC.cleanup(&queue).await;
}

/// A message left in a delay queue of the earlier layout (`<queue>.delay.<ms>`, which
/// dead-letters straight into the queue) still arrives, and a Hermes worker does not run it
/// before it is due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_in_an_earlier_delay_queue_still_arrives_on_time() {
    let queue = unique_queue_name("legacy");
    let connection = raw().await.unwrap();
    let channel = connection.create_channel().await.unwrap();
    declare_durable(&channel, &queue).await;
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    let legacy = legacy_delay_queue(&queue, 640);
    let mut arguments = FieldTable::default();
    arguments.insert("x-message-ttl".into(), AMQPValue::LongLongInt(640));
    arguments.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString("".into()),
    );
    arguments.insert(
        "x-dead-letter-routing-key".into(),
        AMQPValue::LongString(queue.as_str().into()),
    );
    channel
        .queue_declare(legacy.as_str().into(), durable, arguments)
        .await
        .unwrap();
    let m = Message::builder("old-layout")
        .delay(Duration::from_millis(2_000))
        .build()
        .unwrap();
    let _ = connection.close(200, "bye".into()).await;
    publish_raw(&legacy, &JsonSerializer.serialize(&m).unwrap()).await;
    expect_when_due(&CLASSIC.open(&queue).await.unwrap(), &m).await;
    CLASSIC.cleanup(&queue).await;
}
