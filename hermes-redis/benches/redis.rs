//! Redis driver throughput beside raw client loops in the same run, for both client
//! libraries: emit (raw: an `SADD` loop), handle with a no-op handler at concurrency 1 and 8
//! (raw: an `SPOP` loop), the median emit-to-handle latency of an idle worker, and the client
//! CPU time per handled message; then the one-by-one emit again on tokio's current-thread
//! runtime.
//!
//! `cargo bench -p hermes-redis --bench redis` (`HERMES_REDIS_URL`, default
//! redis://127.0.0.1:6379; `HERMES_BENCH_N` messages per figure, default 20,000;
//! `HERMES_BENCH_ONLY=emit` for the one-by-one emit figures alone).

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_core::{DEFAULT_PRIORITY, Emitter, JsonSerializer, Message, Serializer};
use hermes_redis::{RedisOptions, RedisSetDriver};
use hermes_testkit::bench::{
    cpu_time, emit_from_tasks, emit_in_batches, idle_latency, print_ratio, time_dispatch,
};

fn url() -> String {
    std::env::var("HERMES_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

fn sample() -> Message {
    Message::builder("send-email")
        .payload(&serde_json::json!({"to": "someone@example.com", "user_id": 12345}))
        .build()
        .unwrap()
}

/// A raw connection of each library, for the baselines.
enum Raw {
    RedisRs(redis::aio::MultiplexedConnection),
    Fred(fred::clients::Client),
}

impl Raw {
    async fn open(fred: bool) -> Raw {
        if fred {
            use fred::interfaces::ClientLike;
            let config = fred::types::config::Config::from_url(&url()).unwrap();
            let client = fred::types::Builder::from_config(config).build().unwrap();
            client.init().await.unwrap();
            Raw::Fred(client)
        } else {
            let client = redis::Client::open(url()).unwrap();
            Raw::RedisRs(client.get_multiplexed_async_connection().await.unwrap())
        }
    }

    async fn sadd(&mut self, key: &str, body: &[u8]) {
        match self {
            Raw::RedisRs(c) => {
                let _: i64 = redis::cmd("SADD")
                    .arg(key)
                    .arg(body)
                    .query_async(c)
                    .await
                    .unwrap();
            }
            Raw::Fred(c) => {
                use fred::interfaces::SetsInterface;
                let _: i64 = c.sadd(key, body.to_vec()).await.unwrap();
            }
        }
    }

    async fn spop(&mut self, key: &str) -> Option<Vec<u8>> {
        match self {
            Raw::RedisRs(c) => redis::cmd("SPOP").arg(key).query_async(c).await.unwrap(),
            Raw::Fred(c) => {
                use fred::interfaces::SetsInterface;
                c.spop(key, None).await.unwrap()
            }
        }
    }

    async fn del(&mut self, keys: &[String]) {
        for key in keys {
            match self {
                Raw::RedisRs(c) => {
                    let _: i64 = redis::cmd("DEL").arg(key).query_async(c).await.unwrap();
                }
                Raw::Fred(c) => {
                    use fred::interfaces::KeysInterface;
                    let _: i64 = c.del(key).await.unwrap();
                }
            }
        }
    }
}

/// Fills `key` with `n` distinct messages through a redis-rs pipeline.
async fn fill(key: &str, n: usize) {
    let client = redis::Client::open(url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut pipe = redis::pipe();
        for _ in chunk {
            pipe.cmd("SADD")
                .arg(key)
                .arg(JsonSerializer.serialize(&sample()).unwrap())
                .ignore();
        }
        let _: () = pipe.query_async(&mut connection).await.unwrap();
    }
}

async fn driver(fred: bool, key: &str, tweak: impl FnOnce(&mut RedisOptions)) -> RedisSetDriver {
    let mut options = RedisOptions::default();
    options.key = key.to_owned();
    options.schedule_key = format!("{key}_schedule");
    tweak(&mut options);
    if fred {
        RedisSetDriver::connect_fred(&url(), options).await.unwrap()
    } else {
        RedisSetDriver::connect_redis(&url(), options)
            .await
            .unwrap()
    }
}

fn keys(key: &str) -> Vec<String> {
    [
        "",
        "_schedule",
        "_schedule_priorities",
        "_in_flight",
        "_dead",
        "_dead_letters",
        "_workers",
        "_wake",
    ]
    .iter()
    .map(|s| format!("{key}{s}"))
    .collect()
}

/// Rounds the one-by-one emit figure is measured in, alternating with the raw loop so that
/// both meet the same load of a shared machine.
const ROUNDS: usize = 10;

/// One emitter sending `n` messages one by one to `key`, beside a raw `SADD` loop, in
/// [`ROUNDS`] alternating rounds: prints the figure (`runtime` names the runtime when it is not
/// the default one) and returns the raw loop's time and the emitter.
async fn emit_one_by_one(
    fred: bool,
    key: &str,
    n: usize,
    raw: &mut Raw,
    runtime: &str,
) -> (Duration, Arc<Emitter>) {
    let body = JsonSerializer.serialize(&sample()).unwrap();
    let emitter = Emitter::new(driver(fred, key, |_| {}).await);
    let per_round = n / ROUNDS;
    let (mut raw_emit, mut ours) = (Duration::ZERO, Duration::ZERO);
    let (mut raw_cpu, mut our_cpu) = (Duration::ZERO, Duration::ZERO);
    // Each round's ratio: raw time over ours, both measured back to back.
    let mut ratios = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let (raw_before, ours_before) = (raw_emit, ours);
        for raw_turn in [round % 2 == 0, round % 2 == 1] {
            let start = Instant::now();
            let cpu = cpu_time();
            if raw_turn {
                for i in 0..per_round {
                    let mut b = body.clone();
                    b.extend_from_slice(format!(" {round} {i}").as_bytes());
                    raw.sadd(key, &b).await;
                }
                raw_emit += start.elapsed();
                raw_cpu += cpu_time() - cpu;
            } else {
                for _ in 0..per_round {
                    emitter.emit(&sample(), DEFAULT_PRIORITY).await.unwrap();
                }
                ours += start.elapsed();
                our_cpu += cpu_time() - cpu;
            }
        }
        ratios.push((raw_emit - raw_before).as_secs_f64() / (ours - ours_before).as_secs_f64());
        raw.del(&keys(key)).await;
    }
    ratios.sort_by(f64::total_cmp);
    let sent = per_round * ROUNDS;
    print_ratio(
        &format!("emit{runtime} (raw: SADD loop)"),
        sent,
        ours,
        raw_emit,
    );
    let per_message = |cpu: Duration| cpu.as_secs_f64() * 1e6 / sent as f64;
    println!(
        "{:<44} {:.1} µs of client CPU per message (raw: {:.1} µs); median of the {ROUNDS} \
         rounds' ratios {:.2} (lowest {:.2}, highest {:.2})",
        "",
        per_message(our_cpu),
        per_message(raw_cpu),
        (ratios[ROUNDS / 2 - 1] + ratios[ROUNDS / 2]) / 2.0,
        ratios[0],
        ratios[ROUNDS - 1]
    );
    (raw_emit, Arc::new(emitter))
}

/// The one-by-one emit figure of both libraries alone, on the runtime `runtime` names.
async fn emit_alone(n: usize, runtime: &str) {
    for fred in [false, true] {
        let library = if fred { "fred" } else { "redis" };
        let key = format!("bench-{library}-{:08x}", rand::random::<u32>());
        let mut raw = Raw::open(fred).await;
        raw.del(&keys(&key)).await;
        println!("-- {library}, {runtime} runtime ({n} messages)");
        emit_one_by_one(fred, &key, n, &mut raw, &format!(", {runtime} runtime")).await;
    }
}

async fn bench(fred: bool, n: usize) {
    let library = if fred { "fred" } else { "redis" };
    let key = format!("bench-{library}-{:08x}", rand::random::<u32>());
    let mut raw = Raw::open(fred).await;
    raw.del(&keys(&key)).await;
    println!("-- {library} ({n} messages per figure)");

    let (raw_emit, emitter) = emit_one_by_one(fred, &key, n, &mut raw, "").await;

    // Eight tasks on one driver (its connection pipelines them), and batches of 100.
    let took = emit_from_tasks(emitter.clone(), 8, n / 8, sample).await;
    print_ratio("emit, 8 tasks (raw: SADD loop)", n / 8 * 8, took, raw_emit);
    raw.del(&keys(&key)).await;
    let took = emit_in_batches(&emitter, n / 100, 100, sample).await;
    print_ratio(
        "emit_batch of 100 (raw: SADD loop)",
        n / 100 * 100,
        took,
        raw_emit,
    );
    raw.del(&keys(&key)).await;

    // The raw consumer: one SPOP per message.
    fill(&key, n).await;
    let start = Instant::now();
    let mut popped = 0;
    while raw.spop(&key).await.is_some() {
        popped += 1;
    }
    let raw_handle = start.elapsed();
    assert_eq!(popped, n);

    for concurrency in [1, 8] {
        fill(&key, n).await;
        let prefetch = std::env::var("PREFETCH").ok().and_then(|p| p.parse().ok());
        let driver = Arc::new(
            driver(fred, &key, |o| {
                if let Some(p) = prefetch {
                    o.prefetch = p
                }
            })
            .await,
        );
        let cpu = cpu_time();
        let took = time_dispatch(driver.clone(), "send-email", concurrency, n).await;
        let cpu = cpu_time() - cpu;
        print_ratio(
            &format!("handle, concurrency {concurrency} (raw: SPOP loop)"),
            n,
            took,
            raw_handle,
        );
        println!(
            "{:<44} {:.1} µs of client CPU per handled message",
            "",
            cpu.as_secs_f64() * 1e6 / n as f64
        );
        raw.del(&keys(&key)).await;
    }

    // Latency: an idle worker, messages emitted one by one; polling as before wake-ups (every
    // 100 ms), and woken at the default settings.
    for (label, wake_ups, refresh) in [
        ("polling", false, Duration::from_millis(100)),
        ("woken", true, RedisOptions::default().refresh_interval),
    ] {
        let tweak = |o: &mut RedisOptions| {
            o.wake_ups = wake_ups;
            o.refresh_interval = refresh;
        };
        let worker = Arc::new(driver(fred, &key, tweak).await);
        let emitter = Arc::new(driver(fred, &key, tweak).await);
        let (median, p90, p99) = idle_latency(worker, emitter, 300, Duration::from_millis(7)).await;
        println!(
            "{:<44} median {median:.2?}, p90 {p90:.2?}, p99 {p99:.2?} ({label}, refresh interval {refresh:?})",
            "emit-to-handle latency, idle worker"
        );
        raw.del(&keys(&key)).await;
        let per_second = idle_commands(Arc::new(driver(fred, &key, tweak).await)).await;
        println!(
            "{:<44} {per_second:.1} commands per second ({label}, refresh interval {refresh:?})",
            "idle worker"
        );
        raw.del(&keys(&key)).await;
    }
}

/// The commands clients send per second while one idle worker waits on `driver`, over 10 s:
/// the lines `MONITOR` shows, less those a script ran. Nothing else may use the server
/// meanwhile.
async fn idle_commands(driver: Arc<RedisSetDriver>) -> f64 {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let mut dispatcher = hermes_core::Dispatcher::from_arc(driver);
    dispatcher.register_fn("nothing", |_m| async { Ok(true) });
    let stop = dispatcher.cancellation_token();
    let worker = tokio::spawn(async move { dispatcher.handle(&[]).await });
    tokio::time::sleep(Duration::from_secs(3)).await;
    let address = url()
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_owned();
    let mut monitor = tokio::net::TcpStream::connect(&address).await.unwrap();
    monitor.write_all(b"MONITOR\r\n").await.unwrap();
    let mut lines = BufReader::new(monitor).lines();
    let window = Duration::from_secs(10);
    let mut sent = 0u64;
    let _ = tokio::time::timeout(window, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains(" [") && !line.contains(" lua]") {
                sent += 1;
            }
        }
    })
    .await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    sent as f64 / window.as_secs_f64()
}

fn main() {
    let n: usize = std::env::var("HERMES_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let emit_only = std::env::var("HERMES_BENCH_ONLY").is_ok_and(|only| only == "emit");
    let multi_thread = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    multi_thread.block_on(async {
        if emit_only {
            emit_alone(n, "multi-thread").await;
        } else {
            bench(false, n).await;
            bench(true, n).await;
        }
    });
    drop(multi_thread);
    let current_thread = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    current_thread.block_on(emit_alone(n, "current-thread"));
}
