//! One node of a three-node RabbitMQ cluster stops while a worker and an emitter are busy on
//! quorum queues, and starts again later: every message whose emit returned Ok must be
//! handled. Prints the figures of the run; exits with status 1 when a confirmed message was
//! lost.
//!
//! Run by `./scripts/rabbitmq-cluster.sh node-loss`, which starts the cluster first. By hand:
//! `cargo run --release -p hermes-rabbitmq --example node_loss` with the cluster of that
//! script running. `HERMES_NODE_LOSS_N` sets the number of messages (default 20,000).
//!
//! Both processes' drivers list the three nodes, node 1 first, so they connect to node 1, and
//! the queue's leader is placed there (the broker puts a new quorum queue's leader on the
//! declaring client's node). The run begins to stop the leader's node after a third of the
//! messages, so the queue elects a new leader and both drivers connect to the next node, and
//! begins to start it again after two thirds, the emitter going on meanwhile. A failed emit is
//! retried with the same message (the same id) until the broker confirms it.

use std::collections::HashMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_core::{DEFAULT_PRIORITY, Dispatcher, Emitter, Message};
use hermes_rabbitmq::{QueueType, RabbitMqDriver, RabbitMqOptions};

/// The AMQP ports of the script's three nodes.
const PORTS: [u16; 3] = [5681, 5682, 5683];

/// How long one emit may take before the run calls it a hang.
const EMIT_BOUND: Duration = Duration::from_secs(30);

/// How long the run waits for the last confirmed messages to be handled.
const DRAIN_BOUND: Duration = Duration::from_secs(120);

/// What the worker saw: how often each id was handled, and the longest pause between two.
#[derive(Default)]
struct Handled {
    counts: HashMap<String, u32>,
    last: Option<Instant>,
    longest_pause: Duration,
}

/// The cluster script.
const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../scripts/rabbitmq-cluster.sh"
);

/// Runs the cluster script with `args`; what it printed.
fn script(args: &[&str]) -> Result<String, String> {
    finish(spawn(args)?, args)
}

/// Starts the cluster script with `args`, without waiting for it.
fn spawn(args: &[&str]) -> Result<std::process::Child, String> {
    Command::new(SCRIPT)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {SCRIPT}: {e}"))
}

/// Waits for the cluster script started with `args`; what it printed.
fn finish(child: std::process::Child, args: &[&str]) -> Result<String, String> {
    let output = child
        .wait_with_output()
        .map_err(|e| format!("{SCRIPT} {}: {e}", args.join(" ")))?;
    if !output.status.success() {
        return Err(format!(
            "{SCRIPT} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn driver(queue: &str) -> Result<RabbitMqDriver, hermes_core::Error> {
    let urls: Vec<String> = PORTS
        .iter()
        .map(|port| format!("amqp://guest:guest@127.0.0.1:{port}/%2f"))
        .collect();
    let mut options = RabbitMqOptions::default();
    options.queue_type = QueueType::Quorum;
    options.prefetch = 16;
    Ok(RabbitMqDriver::new(&urls[0], queue, options)?.with_fallback_urls(urls[1..].to_vec()))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::var("HERMES_NODE_LOSS_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let queue = format!("node-loss-{}", std::process::id());
    let emitter = Emitter::new(driver(&queue)?);

    // The first message declares the queue; its leader tells which node to stop.
    let first = Message::new("job");
    emitter.emit(&first, DEFAULT_PRIORITY).await?;
    let leader = script(&["leader", &queue])?;
    let node = (1..=3)
        .find(|i| leader.starts_with(&format!("hermes-c{i}@")))
        .ok_or_else(|| format!("the leader of {queue} is {leader:?}, not a node of the script"))?;
    println!("node loss: queue {queue}, leader {leader}; {n} messages, a worker at concurrency 8");

    let handled: Arc<Mutex<Handled>> = Arc::default();
    let record = handled.clone();
    let mut dispatcher = Dispatcher::new(driver(&queue)?).concurrency(8);
    dispatcher.register_fn("job", move |message| {
        let record = record.clone();
        async move {
            let mut handled = record.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            if let Some(last) = handled.last {
                handled.longest_pause = handled.longest_pause.max(now - last);
            }
            handled.last = Some(now);
            *handled.counts.entry(message.id().to_owned()).or_default() += 1;
            Ok(true)
        }
    });
    let stop_worker = dispatcher.cancellation_token();
    let worker = tokio::spawn(async move { dispatcher.handle(&[]).await });

    let started = Instant::now();
    let mut confirmed = vec![first.id().to_owned()];
    let mut failed_emits = 0u64;
    let mut longest_gap = Duration::ZERO;
    let mut stopped_at = None;
    let mut back_at = None;
    let node_arg = node.to_string();
    let (stop_args, start_args) = (["stop-node", &node_arg], ["start-node", &node_arg]);
    let mut control = None;
    for i in 1..n {
        // The node stops and starts while the emitter goes on.
        if i == n / 3 {
            stopped_at = Some(started.elapsed());
            println!("node loss: stopping node {node} after {i} messages");
            control = Some(spawn(&stop_args)?);
        }
        if i == 2 * n / 3 {
            if let Some(stopping) = control.take() {
                finish(stopping, &stop_args)?;
            }
            back_at = Some(started.elapsed());
            println!("node loss: starting node {node} again after {i} messages");
            control = Some(spawn(&start_args)?);
        }
        let message = Message::new("job");
        let asked = Instant::now();
        loop {
            let emit = tokio::time::timeout(EMIT_BOUND, emitter.emit(&message, DEFAULT_PRIORITY));
            let Ok(emitted) = emit.await else {
                return Err(format!("emit {i} hung for {EMIT_BOUND:?}").into());
            };
            match emitted {
                Ok(()) => break,
                Err(e) => {
                    failed_emits += 1;
                    if failed_emits <= 3 {
                        println!("node loss: an emit failed, retried: {e}");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        longest_gap = longest_gap.max(asked.elapsed());
        confirmed.push(message.id().to_owned());
    }
    let emitted_in = started.elapsed();
    if let Some(starting) = control.take() {
        finish(starting, &start_args)?;
    }

    let drained = Instant::now();
    let missing = loop {
        let missing = {
            let handled = handled.lock().unwrap_or_else(|e| e.into_inner());
            confirmed
                .iter()
                .filter(|id| !handled.counts.contains_key(*id))
                .count()
        };
        if missing == 0 || drained.elapsed() > DRAIN_BOUND {
            break missing;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let all_handled_in = started.elapsed();
    stop_worker.cancel();
    let worker_result = tokio::time::timeout(Duration::from_secs(30), worker)
        .await
        .map_err(|_| "the worker did not stop within 30 s of being asked")??;

    let handled = handled.lock().unwrap_or_else(|e| e.into_inner());
    let duplicates: u32 = handled.counts.values().map(|c| c - 1).sum();
    let seconds =
        |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{:.1} s", d.as_secs_f64()));
    println!(
        "node loss: {} confirmed, {} handled distinct, {missing} lost, {duplicates} duplicates; \
         {failed_emits} failed emits (retried), longest emit {:.2} s, longest pause between \
         handlings {:.2} s; node {node} stopping from {}, starting from {}; all emitted after {:.1} s ({:.0} \
         msgs/s), all handled after {:.1} s; the worker {}",
        confirmed.len(),
        handled.counts.len(),
        longest_gap.as_secs_f64(),
        handled.longest_pause.as_secs_f64(),
        seconds(stopped_at),
        seconds(back_at),
        emitted_in.as_secs_f64(),
        confirmed.len() as f64 / emitted_in.as_secs_f64(),
        all_handled_in.as_secs_f64(),
        match &worker_result {
            Ok(()) => "stopped when asked".to_owned(),
            Err(e) => format!("failed: {e}"),
        },
    );
    if missing > 0 || worker_result.is_err() {
        std::process::exit(1);
    }
    Ok(())
}
