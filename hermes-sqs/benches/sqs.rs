//! SQS driver throughput beside raw SDK loops in the same run, against the SQS-compatible
//! server of the tests (moto on loopback): emit one by one (raw: a `SendMessage` loop), emit in
//! batches (raw: a `SendMessageBatch` loop of ten), and handle with a no-op handler at
//! concurrency 1 and 8 (raw: one, and eight concurrent, `ReceiveMessage` (10, 1 s wait) +
//! `DeleteMessage` loops). The queues of the handle figures are filled with raw
//! `SendMessageBatch`es. Each figure has queues of its own, named after the process id, and
//! every queue is deleted at the end.
//!
//! The server runs on the same machine, so the figures mostly measure it: read the ratios.
//!
//! `cargo bench -p hermes-sqs --bench sqs` (`HERMES_SQS_ENDPOINT`, a loopback address only,
//! default http://127.0.0.1:4566; `HERMES_BENCH_N` messages per figure, default 300).

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hermes_core::{DEFAULT_PRIORITY, Emitter, JsonSerializer, Message, Serializer};
use hermes_sqs::aws_sdk_sqs::Client;
use hermes_sqs::aws_sdk_sqs::types::{QueueAttributeName, SendMessageBatchRequestEntry};
use hermes_sqs::{SqsDriver, SqsOptions, quarantine_queue};
use hermes_testkit::bench::{print_ratio, time_dispatch};

/// Long enough that no message comes back during a figure.
const VISIBILITY_SECONDS: &str = "60";

fn sample() -> Message {
    Message::builder("send-email")
        .payload(&serde_json::json!({"to": "someone@example.com", "user_id": 12345}))
        .build()
        .unwrap()
}

fn body() -> String {
    String::from_utf8(JsonSerializer.serialize(&sample()).unwrap()).unwrap()
}

fn attributes() -> HashMap<QueueAttributeName, String> {
    HashMap::from([(
        QueueAttributeName::VisibilityTimeout,
        VISIBILITY_SECONDS.to_owned(),
    )])
}

/// The queues of this run, named `bench-<pid>-<figure>`, deleted at the end.
struct Queues {
    prefix: String,
    names: Vec<String>,
}

impl Queues {
    fn name(&mut self, figure: &str) -> String {
        let name = format!("{}-{figure}", self.prefix);
        self.names.push(name.clone());
        name
    }

    /// A queue created with the plain SDK; its URL.
    async fn raw(&mut self, client: &Client, figure: &str) -> String {
        let name = self.name(figure);
        client
            .create_queue()
            .queue_name(&name)
            .set_attributes(Some(attributes()))
            .send()
            .await
            .expect("creating a queue")
            .queue_url
            .expect("a queue URL")
    }

    /// A driver on a queue of its own; the driver creates it.
    async fn driver(&mut self, client: &Client, figure: &str) -> (SqsDriver, String) {
        let name = self.name(figure);
        let mut options = SqsOptions::default();
        options.queue_attributes = attributes();
        let driver = SqsDriver::with_options(client.clone(), &name, options).unwrap();
        let url = driver.queue_url(DEFAULT_PRIORITY).await.unwrap();
        (driver, url)
    }

    async fn delete_all(&self, client: &Client) {
        for name in &self.names {
            common::delete_queue(client, name).await;
            common::delete_queue(client, &quarantine_queue(name)).await;
        }
    }
}

/// Puts `n` messages on the queue at `url` with raw `SendMessageBatch`es of ten.
async fn raw_send_batches(client: &Client, url: &str, n: usize) -> Duration {
    let body = body();
    let start = Instant::now();
    let mut sent = 0;
    while sent < n {
        let entries = (0..(n - sent).min(10))
            .map(|i| {
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(body.clone())
                    .build()
                    .unwrap()
            })
            .collect::<Vec<_>>();
        let count = entries.len();
        let output = client
            .send_message_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .unwrap();
        assert!(output.failed().is_empty(), "{:?}", output.failed());
        sent += count;
    }
    start.elapsed()
}

/// Fills the queue at `url` with `n` distinct messages, with raw `SendMessageBatch`es.
async fn fill(client: &Client, url: &str, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(10) {
        let entries = chunk
            .iter()
            .map(|i| {
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(body())
                    .build()
                    .unwrap()
            })
            .collect::<Vec<_>>();
        client
            .send_message_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .unwrap();
    }
}

/// Takes `n` messages off the queue at `url` with `loops` concurrent raw loops of
/// `ReceiveMessage` (up to 10, waiting up to 1 s), decoding each and deleting it alone.
async fn raw_consume(client: &Client, url: &str, n: usize, loops: usize) -> Duration {
    let taken = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..loops)
        .map(|_| {
            let (client, url, taken) = (client.clone(), url.to_owned(), taken.clone());
            tokio::spawn(async move {
                while taken.load(Ordering::SeqCst) < n {
                    let received = client
                        .receive_message()
                        .queue_url(&url)
                        .max_number_of_messages(10)
                        .wait_time_seconds(1)
                        .send()
                        .await
                        .unwrap();
                    for message in received.messages.unwrap_or_default() {
                        JsonSerializer
                            .deserialize(message.body().unwrap().as_bytes())
                            .unwrap();
                        client
                            .delete_message()
                            .queue_url(&url)
                            .set_receipt_handle(message.receipt_handle)
                            .send()
                            .await
                            .unwrap();
                        taken.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let took = start.elapsed();
    assert!(taken.load(Ordering::SeqCst) >= n);
    took
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("HERMES_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    if let Err(reason) = common::reachable().await {
        panic!("{reason} (start it with scripts/services.sh: ensure_sqs)");
    }
    let client = common::client().await;
    let mut queues = Queues {
        prefix: format!("bench-{:08x}", std::process::id()),
        names: Vec::new(),
    };
    println!("-- sqs at {} ({n} messages per figure)", common::endpoint());

    // Emit one by one.
    let url = queues.raw(&client, "send-raw").await;
    let raw_body = body();
    let start = Instant::now();
    for _ in 0..n {
        client
            .send_message()
            .queue_url(&url)
            .message_body(raw_body.clone())
            .send()
            .await
            .unwrap();
    }
    let raw = start.elapsed();
    let (driver, _) = queues.driver(&client, "send").await;
    let emitter = Emitter::new(driver);
    let start = Instant::now();
    for _ in 0..n {
        emitter.emit(&sample(), DEFAULT_PRIORITY).await.unwrap();
    }
    print_ratio("emit (raw: SendMessage loop)", n, start.elapsed(), raw);

    // Emit in batches.
    let url = queues.raw(&client, "batch-raw").await;
    let raw = raw_send_batches(&client, &url, n).await;
    for (label, per_call, figure) in [
        (
            "emit_batch of 10 (raw: SendMessageBatch of 10)",
            10,
            "batch-10",
        ),
        (
            "emit_batch of all (raw: SendMessageBatch of 10)",
            n,
            "batch-all",
        ),
    ] {
        let (driver, _) = queues.driver(&client, figure).await;
        let emitter = Emitter::new(driver);
        let messages: Vec<Message> = (0..n).map(|_| sample()).collect();
        let start = Instant::now();
        for chunk in messages.chunks(per_call.max(1)) {
            emitter.emit_batch(chunk, DEFAULT_PRIORITY).await.unwrap();
        }
        print_ratio(label, n, start.elapsed(), raw);
    }

    // Handle with a no-op handler.
    for concurrency in [1, 8] {
        let url = queues
            .raw(&client, &format!("handle-{concurrency}-raw"))
            .await;
        fill(&client, &url, n).await;
        let raw = raw_consume(&client, &url, n, concurrency).await;
        let (driver, url) = queues
            .driver(&client, &format!("handle-{concurrency}"))
            .await;
        fill(&client, &url, n).await;
        let took = time_dispatch(Arc::new(driver), "send-email", concurrency, n).await;
        let label = if concurrency == 1 {
            "handle, concurrency 1 (raw: receive+delete loop)".to_owned()
        } else {
            format!("handle, concurrency {concurrency} (raw: {concurrency} receive+delete loops)")
        };
        print_ratio(&label, n, took, raw);
    }

    queues.delete_all(&client).await;
}
