//! Printing benchmark figures beside the raw baseline measured in the same run.

use std::time::Duration;

/// Runs a [`Dispatcher`](hermes_core::Dispatcher) over `driver` at `concurrency`, with a no-op
/// handler for `message_type`, until it has taken `n` messages; returns how long that took.
///
/// # Panics
/// When the dispatcher fails: a benchmark has no better way out.
pub async fn time_dispatch(
    driver: std::sync::Arc<dyn hermes_core::Driver>,
    message_type: &str,
    concurrency: usize,
    n: usize,
) -> Duration {
    time_limited_dispatch(
        driver,
        message_type,
        concurrency,
        n,
        hermes_core::flow::Limits::new(),
    )
    .await
}

/// [`time_dispatch`], with `limits` on `message_type` (checked against the driver's limit
/// store for every message).
///
/// # Panics
/// When the limits are refused or the dispatcher fails.
pub async fn time_limited_dispatch(
    driver: std::sync::Arc<dyn hermes_core::Driver>,
    message_type: &str,
    concurrency: usize,
    n: usize,
    limits: hermes_core::flow::Limits,
) -> Duration {
    let mut dispatcher = hermes_core::Dispatcher::from_arc(driver)
        .concurrency(concurrency)
        .max_items(n as u64);
    dispatcher
        .limit(message_type, limits)
        .expect("the benchmark's limits");
    dispatcher.register_handler(
        message_type,
        std::sync::Arc::new(hermes_core::handler_fn(|_m: hermes_core::Message| async {
            Ok(true)
        })),
    );
    let start = std::time::Instant::now();
    dispatcher.handle(&[]).await.expect("the dispatcher failed");
    start.elapsed()
}

/// Messages per second for `n` messages in `took`.
pub fn rate(n: usize, took: Duration) -> f64 {
    n as f64 / took.as_secs_f64()
}

/// Prints one figure: Hermes' rate and cost per message, the raw loop's rate, and their ratio.
pub fn print_ratio(what: &str, n: usize, ours: Duration, raw: Duration) {
    println!(
        "{what:<44} {:>9.0} msgs/s {:>8.2} µs/msg | raw {:>9.0} msgs/s | ratio {:.2}",
        rate(n, ours),
        ours.as_secs_f64() * 1e6 / n as f64,
        rate(n, raw),
        rate(n, ours) / rate(n, raw)
    );
}

/// User and system CPU time of this process so far (Linux, from `/proc/self/stat`, in clock
/// ticks of 10 ms); zero elsewhere.
pub fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// Emit-to-handle latency of an idle worker: `samples` messages of type `latency` sent one
/// by one through `emitter`, `gap` apart, handled by a dispatcher on `worker`. Returns the
/// median, the 90th and the 99th percentile.
///
/// # Panics
/// When a send or the dispatcher fails.
pub async fn idle_latency(
    worker: std::sync::Arc<dyn hermes_core::Driver>,
    emitter: std::sync::Arc<dyn hermes_core::Driver>,
    samples: u64,
    gap: Duration,
) -> (Duration, Duration, Duration) {
    idle_latency_of(worker, samples, gap, || {
        let emitter = emitter.clone();
        async move {
            emitter
                .send(
                    &hermes_core::Message::new("latency"),
                    hermes_core::DEFAULT_PRIORITY,
                )
                .await
                .expect("sending a latency sample");
        }
    })
    .await
}

/// Emit-to-handle latency of an idle worker: `samples` times, `emit` sends one message of
/// type `latency` (from this process or from another one it starts), then waits `gap`; a
/// dispatcher on `worker` handles them. The latency of a message runs from its creation
/// time to its handler. Returns the median, the 90th and the 99th percentile.
///
/// # Panics
/// When the dispatcher fails.
pub async fn idle_latency_of<F, Fut>(
    worker: std::sync::Arc<dyn hermes_core::Driver>,
    samples: u64,
    gap: Duration,
    mut emit: F,
) -> (Duration, Duration, Duration)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    use std::sync::{Arc, Mutex};

    use hermes_core::time::unix_now;
    use hermes_core::{Dispatcher, Message, handler_fn};

    let latencies: Arc<Mutex<Vec<f64>>> = Arc::default();
    let record = latencies.clone();
    let mut dispatcher = Dispatcher::from_arc(worker).max_items(samples);
    dispatcher.register_handler(
        "latency",
        Arc::new(handler_fn(move |m: Message| {
            let record = record.clone();
            async move {
                record
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(unix_now() - m.created());
                Ok(true)
            }
        })),
    );
    let running = tokio::spawn(async move { dispatcher.handle(&[]).await });
    for _ in 0..samples {
        emit().await;
        tokio::time::sleep(gap).await;
    }
    running
        .await
        .expect("the dispatcher task")
        .expect("the dispatcher");
    let mut latencies = latencies.lock().unwrap_or_else(|e| e.into_inner()).clone();
    latencies.sort_by(f64::total_cmp);
    let at = |q: usize| Duration::from_secs_f64(latencies[latencies.len() * q / 100].max(0.0));
    (at(50), at(90), at(99))
}

/// How long `tasks` tasks take to emit `per_task` messages each (made by `message`) through
/// one `emitter`, all at once.
///
/// # Panics
/// When an emit fails.
pub async fn emit_from_tasks(
    emitter: std::sync::Arc<hermes_core::Emitter>,
    tasks: usize,
    per_task: usize,
    message: fn() -> hermes_core::Message,
) -> Duration {
    let start = std::time::Instant::now();
    let running: Vec<_> = (0..tasks)
        .map(|_| {
            let emitter = emitter.clone();
            tokio::spawn(async move {
                for _ in 0..per_task {
                    emitter
                        .emit(&message(), hermes_core::DEFAULT_PRIORITY)
                        .await
                        .expect("emitting");
                }
            })
        })
        .collect();
    for task in running {
        task.await.expect("an emitting task");
    }
    start.elapsed()
}

/// How long `batches` calls of `emit_batch` with `size` messages each (made by `message`) take
/// through `emitter`, one after the other.
///
/// # Panics
/// When an emit fails.
pub async fn emit_in_batches(
    emitter: &hermes_core::Emitter,
    batches: usize,
    size: usize,
    message: fn() -> hermes_core::Message,
) -> Duration {
    let batch: Vec<hermes_core::Message> = (0..size).map(|_| message()).collect();
    let start = std::time::Instant::now();
    for _ in 0..batches {
        emitter
            .emit_batch(&batch, hermes_core::DEFAULT_PRIORITY)
            .await
            .expect("emitting a batch");
    }
    start.elapsed()
}
