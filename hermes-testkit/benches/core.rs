//! Throughput of the library's own work: JSON encode/decode (and sealed with `hermes-seal`,
//! beside plain JSON), and dispatching on the in-memory
//! driver with a no-op handler, each beside a raw baseline measured in the same run; then what
//! the metrics and spans cost a dispatched message once a recorder and a span subscriber are
//! installed, against the same dispatch without them.
//!
//! `cargo bench -p hermes-testkit --bench core` (set `HERMES_BENCH_N` for the message count).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_core::{DEFAULT_PRIORITY, Driver, JsonSerializer, Message, Serializer};
use hermes_testkit::MemoryDriver;
use hermes_testkit::bench::{print_ratio, time_dispatch};
use serde_json::json;

fn sample() -> Message {
    Message::builder("send-email")
        .payload(&json!({"to": "someone@example.com", "subject": "Hello", "user_id": 12345, "tags": ["a", "b"], "score": 1.5}))
        .build()
        .unwrap()
}

/// The same fields as a plain struct, for the serde baseline.
#[derive(serde::Serialize, serde::Deserialize)]
struct RawEnvelope {
    message: RawMessage,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct RawMessage {
    id: String,
    #[serde(rename = "type")]
    message_type: String,
    created: f64,
    payload: serde_json::Value,
    execute_at: Option<f64>,
    retries: u32,
}

fn bench_json(n: usize) {
    let message = sample();
    let bytes = JsonSerializer.serialize(&message).unwrap();
    let raw = RawEnvelope {
        message: RawMessage {
            id: message.id().to_owned(),
            message_type: message.message_type().to_owned(),
            created: message.created(),
            payload: message.payload().unwrap().clone(),
            execute_at: None,
            retries: 0,
        },
    };

    let start = Instant::now();
    for _ in 0..n {
        black_box(JsonSerializer.serialize(black_box(&message)).unwrap());
    }
    let ours = start.elapsed();
    let start = Instant::now();
    for _ in 0..n {
        black_box(serde_json::to_vec(black_box(&raw)).unwrap());
    }
    print_ratio("json encode (raw: serde_json)", n, ours, start.elapsed());

    let start = Instant::now();
    for _ in 0..n {
        black_box(JsonSerializer.deserialize(black_box(&bytes)).unwrap());
    }
    let ours = start.elapsed();
    let start = Instant::now();
    for _ in 0..n {
        black_box(serde_json::from_slice::<RawEnvelope>(black_box(&bytes)).unwrap());
    }
    print_ratio("json decode (raw: serde_json)", n, ours, start.elapsed());
}

/// Encode and decode with a sealing serializer (sealed; sealed and compressed over 1 KiB),
/// beside `JsonSerializer` in the same run.
fn bench_sealing(n: usize) {
    use hermes_seal::{SealKey, SealKeys, SealingSerializer};

    let message = sample();
    let keys = SealKeys::new(SealKey::generate("bench").unwrap());
    for (label, sealing) in [
        ("sealed", SealingSerializer::new(keys.clone())),
        (
            "sealed, zstd over 1 KiB",
            SealingSerializer::new(keys).compress_over(1024),
        ),
    ] {
        let plain = JsonSerializer.serialize(&message).unwrap();
        let sealed = sealing.serialize(&message).unwrap();
        let time = |f: &dyn Fn()| {
            let start = Instant::now();
            for _ in 0..n {
                f();
            }
            start.elapsed()
        };
        let ours = time(&|| {
            black_box(sealing.serialize(black_box(&message)).unwrap());
        });
        let raw = time(&|| {
            black_box(JsonSerializer.serialize(black_box(&message)).unwrap());
        });
        print_ratio(&format!("{label} encode (raw: json)"), n, ours, raw);
        let ours = time(&|| {
            black_box(sealing.deserialize(black_box(&sealed)).unwrap());
        });
        let raw = time(&|| {
            black_box(JsonSerializer.deserialize(black_box(&plain)).unwrap());
        });
        print_ratio(&format!("{label} decode (raw: json)"), n, ours, raw);
    }
}

async fn fill(driver: &MemoryDriver, n: usize) {
    let message = sample();
    for _ in 0..n {
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    }
}

/// The baseline: the same driver drained by a bare receive + ack loop.
async fn raw_drain(n: usize) -> Duration {
    let driver = MemoryDriver::new();
    fill(&driver, n).await;
    let start = Instant::now();
    for _ in 0..n {
        let d = driver.receive(&[], Duration::ZERO).await.unwrap().unwrap();
        driver.ack(&d).await.unwrap();
    }
    start.elapsed()
}

async fn dispatch(n: usize, concurrency: usize) -> Duration {
    let driver = Arc::new(MemoryDriver::new());
    fill(&driver, n).await;
    let took = time_dispatch(driver.clone(), "send-email", concurrency, n).await;
    assert!(driver.is_empty());
    took
}

fn main() {
    let n: usize = std::env::var("HERMES_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    println!("hermes core bench, {n} messages per figure");
    bench_json(n);
    bench_sealing(n);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        for concurrency in [1, 8] {
            let raw = raw_drain(n).await;
            let ours = dispatch(n, concurrency).await;
            print_ratio(
                &format!("dispatch, concurrency {concurrency} (raw: loop)"),
                n,
                ours,
                raw,
            );
            let overhead = (ours.saturating_sub(raw)).as_secs_f64() * 1e6 / n as f64;
            println!("{:<34} {overhead:.2} µs/msg of dispatcher overhead", "");
        }
        telemetry_cost(n).await;
    });
}

/// A subscriber that takes every span and event and does nothing with them: what spans cost
/// beyond the work of an application's own layers.
struct EverySpan;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for EverySpan {}

/// Dispatch with no recorder and no subscriber, then with both installed (globally, so this
/// runs last): the difference per message is what telemetry costs.
async fn telemetry_cost(n: usize) {
    let rounds = 3;
    let mut bare = Duration::MAX;
    for _ in 0..rounds {
        bare = bare.min(dispatch(n, 1).await);
    }
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshots = recorder.snapshotter();
    metrics::set_global_recorder(recorder).expect("the first recorder");
    use tracing_subscriber::layer::SubscriberExt;
    let subscriber = tracing_subscriber::registry()
        .with(EverySpan)
        .with(tracing_subscriber::filter::LevelFilter::INFO);
    tracing::subscriber::set_global_default(subscriber).expect("the first subscriber");
    let mut observed = Duration::MAX;
    for _ in 0..rounds {
        observed = observed.min(dispatch(n, 1).await);
    }
    assert!(
        !snapshots.snapshot().into_vec().is_empty(),
        "the recorder saw the metrics"
    );
    print_ratio("dispatch observed (raw: unobserved)", n, observed, bare);
    let cost = observed.saturating_sub(bare).as_secs_f64() * 1e6 / n as f64;
    let verdict = if cost < TELEMETRY_CEILING_US {
        "under"
    } else {
        "OVER"
    };
    println!(
        "{:<34} {cost:.2} µs/msg for metrics and spans ({verdict} the {TELEMETRY_CEILING_US} µs ceiling)",
        ""
    );
}

/// What metrics and spans may add to the dispatch of one message, in µs.
const TELEMETRY_CEILING_US: f64 = 2.0;
