//! RabbitMQ driver throughput beside raw lapin loops in the same run: emit with publisher
//! confirms (raw: publish + confirm loop), handle with a no-op handler at prefetch 1 /
//! concurrency 1, prefetch 1 / concurrency 8 and prefetch 16 / concurrency 8 (raw: a
//! consume-and-ack loop at the same prefetch), the idle emit-to-handle latency, and how late
//! delayed messages reach a plain consumer of the queue through the delay ladder.
//!
//! `cargo bench -p hermes-rabbitmq --bench rabbitmq` (`HERMES_AMQP_URL`, `HERMES_BENCH_N`,
//! default 5,000 messages per figure).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use hermes_core::{DEFAULT_PRIORITY, Emitter, JsonSerializer, Message, Serializer};
use hermes_rabbitmq::{RabbitMqDriver, RabbitMqOptions, exchanges_of, queues_of};
use hermes_testkit::bench::{
    emit_from_tasks, emit_in_batches, idle_latency, print_ratio, time_dispatch,
};
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, ExchangeDeleteOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

fn url() -> String {
    std::env::var("HERMES_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

fn sample() -> Message {
    Message::builder("send-email")
        .payload(&serde_json::json!({"to": "someone@example.com", "user_id": 12345}))
        .build()
        .unwrap()
}

async fn channel(connection: &Connection, queue: &str) -> Channel {
    let channel = connection.create_channel().await.unwrap();
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare(queue.into(), durable, FieldTable::default())
        .await
        .unwrap();
    channel
}

async fn raw_publish(channel: &Channel, queue: &str, n: usize) -> Duration {
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let body = JsonSerializer.serialize(&sample()).unwrap();
    let start = Instant::now();
    for _ in 0..n {
        channel
            .basic_publish(
                "".into(),
                queue.into(),
                BasicPublishOptions::default(),
                &body,
                BasicProperties::default().with_delivery_mode(2),
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }
    start.elapsed()
}

async fn raw_consume(connection: &Connection, queue: &str, n: usize, prefetch: u16) -> Duration {
    let channel = channel(connection, queue).await;
    channel
        .basic_qos(prefetch, BasicQosOptions::default())
        .await
        .unwrap();
    let mut consumer = channel
        .basic_consume(
            queue.into(),
            "bench".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let start = Instant::now();
    for _ in 0..n {
        let delivery = consumer.next().await.unwrap().unwrap();
        JsonSerializer.deserialize(&delivery.data).unwrap();
        delivery.ack(BasicAckOptions::default()).await.unwrap();
    }
    let took = start.elapsed();
    let _ = channel.close(200, "bye".into()).await;
    took
}

fn driver(queue: &str) -> RabbitMqDriver {
    driver_with_prefetch(queue, 1)
}

fn driver_with_prefetch(queue: &str, prefetch: u16) -> RabbitMqDriver {
    let mut options = RabbitMqOptions::default();
    options.prefetch = prefetch;
    RabbitMqDriver::new(&url(), queue, options).unwrap()
}

async fn fill(connection: &Connection, queue: &str, n: usize) {
    let channel = channel(connection, queue).await;
    raw_publish(&channel, queue, n).await;
    let _ = channel.close(200, "bye".into()).await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("HERMES_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
    let queue = format!("bench-{:08x}", std::process::id());
    let connection = Connection::connect(&url(), ConnectionProperties::default())
        .await
        .unwrap();
    println!("-- rabbitmq ({n} messages per figure)");

    let raw = raw_publish(&channel(&connection, &queue).await, &queue, n).await;
    let emitter = Emitter::new(driver(&queue));
    let start = Instant::now();
    for _ in 0..n {
        emitter.emit(&sample(), DEFAULT_PRIORITY).await.unwrap();
    }
    let one_by_one = start.elapsed();
    print_ratio(
        "emit with confirms (raw: publish + confirm)",
        n,
        one_by_one,
        raw,
    );
    raw_consume(&connection, &queue, 2 * n, 16).await;

    // Many emitters on one driver, and batches: against the one emitter above, which waits
    // for each confirm before it publishes the next message.
    let emitter = Arc::new(Emitter::new(driver(&queue)));
    emitter.emit(&sample(), DEFAULT_PRIORITY).await.unwrap();
    let took = emit_from_tasks(emitter.clone(), 8, n / 8, sample).await;
    print_ratio(
        "emit, 8 tasks (baseline: one emitter, above)",
        n / 8 * 8,
        took,
        one_by_one,
    );
    let took = emit_in_batches(&emitter, n / 100, 100, sample).await;
    print_ratio(
        "emit_batch of 100 (baseline: one emitter)",
        n / 100 * 100,
        took,
        one_by_one,
    );
    raw_consume(&connection, &queue, 1 + n / 8 * 8 + n / 100 * 100, 16).await;

    for (concurrency, prefetch) in [(1, 1), (8, 1), (8, 16)] {
        fill(&connection, &queue, n).await;
        let raw = raw_consume(&connection, &queue, n, prefetch).await;
        fill(&connection, &queue, n).await;
        let driver = Arc::new(driver_with_prefetch(&queue, prefetch));
        let took = time_dispatch(driver, "send-email", concurrency, n).await;
        print_ratio(
            &format!("handle, prefetch {prefetch}, concurrency {concurrency} (raw: consume)"),
            n,
            took,
            raw,
        );
    }

    let (median, p90, p99) = idle_latency(
        Arc::new(driver(&queue)),
        Arc::new(driver(&queue)),
        100,
        Duration::from_millis(10),
    )
    .await;
    println!(
        "{:<44} median {median:.1?}, p90 {p90:.1?}, p99 {p99:.1?}",
        "emit-to-handle latency, idle worker"
    );

    delay_lateness(&connection, &queue).await;

    let channel = connection.create_channel().await.unwrap();
    for name in queues_of(&queue) {
        let _ = channel
            .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
            .await;
    }
    for name in exchanges_of(&queue) {
        let _ = channel
            .exchange_delete(name.as_str().into(), ExchangeDeleteOptions::default())
            .await;
    }
    let _ = connection.close(200, "bye".into()).await;
}

/// Sends 200 messages with delays spread from 10 ms to 4 s, consumes the queue with a plain
/// client (as a PHP worker would) while they are sent, and prints how late they arrived:
/// median, p99 and the extremes.
async fn delay_lateness(connection: &Connection, queue: &str) {
    let n = 200;
    let emitter = Emitter::new(driver(queue));
    let channel = channel(connection, queue).await;
    let mut consumer = channel
        .basic_consume(
            queue.into(),
            "plain".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    // The ladder declared and the connection open, as in an emitter that ran before.
    let warm_up = Message::builder("warm-up")
        .delay(Duration::from_secs(4))
        .build()
        .unwrap();
    emitter.emit(&warm_up, DEFAULT_PRIORITY).await.unwrap();
    let consuming = tokio::spawn(async move {
        let mut lateness = Vec::with_capacity(n + 1);
        while lateness.len() < n + 1 {
            let delivery = consumer.next().await.unwrap().unwrap();
            let arrived = hermes_core::time::unix_now();
            let m = JsonSerializer.deserialize(&delivery.data).unwrap();
            lateness.push((arrived - m.execute_at().unwrap()) * 1000.0);
            delivery
                .acker
                .ack(BasicAckOptions::default())
                .await
                .unwrap();
        }
        lateness
    });
    for i in 0..n {
        let ms = 10.0 * 400f64.powf(i as f64 / (n - 1) as f64);
        let m = Message::builder("delayed")
            .delay(Duration::from_secs_f64(ms / 1000.0))
            .build()
            .unwrap();
        emitter.emit(&m, DEFAULT_PRIORITY).await.unwrap();
    }
    let mut lateness = consuming.await.unwrap();
    lateness.sort_by(f64::total_cmp);
    println!(
        "{:<44} median {:.1} ms, p99 {:.1} ms, min {:.1} ms, max {:.1} ms ({} early)",
        "delayed 10 ms-4 s, lateness at a plain consumer",
        lateness[lateness.len() / 2],
        lateness[lateness.len() * 99 / 100],
        lateness[0],
        lateness[lateness.len() - 1],
        lateness.iter().filter(|l| **l < 0.0).count(),
    );
}
