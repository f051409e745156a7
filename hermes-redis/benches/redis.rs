//! Redis driver throughput beside raw client loops in the same run, for both client
//! libraries: emit one by one (raw: the library's `SADD` loop, an `SADD` loop on a bare
//! socket, and `redis-benchmark -c 1`, in rounds that take turns), from 8 tasks and in batches
//! of 100 (beside the same single-client loops), handle with a no-op handler at concurrency 1
//! and 8 (raw: an `SPOP` loop), the emit-to-handle latency of an idle worker (from a long-lived
//! emitter, and from processes that each emit once and exit) and the commands it sends, and the client CPU time per message; then the one-by-one emit again on tokio's
//! current-thread runtime. The multi-thread figures run on a worker thread of the runtime, as
//! a server's request handlers do.
//!
//! `cargo bench -p hermes-redis --bench redis` (`HERMES_REDIS_URL`, default
//! redis://127.0.0.1:6379; `HERMES_BENCH_N` messages per figure, default 20,000;
//! `HERMES_BENCH_ONLY=emit` for the one-by-one emit figures alone, `HERMES_BENCH_ONLY=latency`
//! for the latency figures alone, `HERMES_BENCH_ONLY=limits` for the cost of limits,
//! `HERMES_BENCH_ONLY=batch` for the cost of a batch of 10,000 jobs).

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_core::flow::{Limits, Rate};
use hermes_core::tracking::Batch;
use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, Driver, Emitter, JsonSerializer, Message, Serializer, handler_fn,
};
use hermes_redis::{RedisOptions, RedisSetDriver};
use hermes_testkit::bench::{
    cpu_time, emit_from_tasks, emit_in_batches, idle_latency, idle_latency_of, print_ratio, rate,
    time_dispatch, time_limited_dispatch,
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

/// Messages per round of the one-by-one emit figure: each round times every contender in
/// turn, so that all meet the same load of a shared machine.
const PER_ROUND: usize = 200;

/// What the one-by-one emit figure times, each round.
#[derive(Clone, Copy, PartialEq)]
enum Contender {
    /// One emitter on the driver.
    Ours,
    /// The client library's own `SADD` loop.
    Library,
    /// `SADD` written to and read from a socket on the calling task: what a client can do at
    /// best in this process.
    Socket,
    /// `redis-benchmark -c 1`, Redis' own single-client loop, in a process of its own.
    RedisBenchmark,
}

impl Contender {
    fn label(self) -> &'static str {
        match self {
            Contender::Ours => "ours",
            Contender::Library => "the library's SADD loop",
            Contender::Socket => "a socket SADD loop",
            Contender::RedisBenchmark => "redis-benchmark -c 1",
        }
    }
}

/// A `SADD` loop on a socket of its own: the command written, its answer read, on the calling
/// task.
struct SocketLoop {
    stream: tokio::net::TcpStream,
    command: Vec<u8>,
    answer: Vec<u8>,
}

impl SocketLoop {
    async fn open() -> SocketLoop {
        let stream = tokio::net::TcpStream::connect(address()).await.unwrap();
        stream.set_nodelay(true).unwrap();
        SocketLoop {
            stream,
            command: Vec::new(),
            answer: vec![0; 4096],
        }
    }

    async fn sadd(&mut self, key: &str, member: &[u8]) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        self.command.clear();
        redis::cmd("SADD")
            .arg(key)
            .arg(member)
            .write_packed_command(&mut self.command);
        self.stream.write_all(&self.command).await.unwrap();
        let mut read = 0;
        while !self.answer[..read].ends_with(b"\r\n") {
            let n = self.stream.read(&mut self.answer[read..]).await.unwrap();
            assert!(n > 0, "Redis closed the connection");
            read += n;
        }
        assert_eq!(self.answer[0], b':', "SADD failed");
    }
}

/// `host:port` of the bench's Redis.
fn address() -> String {
    let url = url();
    let rest = url.trim_start_matches("redis://");
    rest.split(['/', '?']).next().unwrap_or(rest).to_owned()
}

/// How long `redis-benchmark -c 1` takes for `n` `SADD`s of `member_length`-byte members (each
/// new), by its own count; `None` when it is not installed.
fn redis_benchmark(key: &str, n: usize, member_length: usize) -> Option<Duration> {
    let (host, port) = address()
        .rsplit_once(':')
        .map(|(h, p)| (h.to_owned(), p.to_owned()))?;
    // `__rand_int__` becomes 12 digits.
    let member = format!(
        "{}__rand_int__",
        "m".repeat(member_length.saturating_sub(12))
    );
    let output = std::process::Command::new("redis-benchmark")
        .args([
            "-h",
            &host,
            "-p",
            &port,
            "-c",
            "1",
            "-r",
            "1000000000000",
            "--csv",
        ])
        .args(["-n", &n.to_string(), "SADD", key, &member])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let rate: f64 = text
        .lines()
        .last()?
        .split(',')
        .nth(1)?
        .trim_matches('"')
        .parse()
        .ok()?;
    Some(Duration::from_secs_f64(n as f64 / rate))
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The single-client loops' times for the same messages, to set other figures beside.
struct Baselines(Vec<(Contender, Duration)>);

impl Baselines {
    /// Prints `what`, `n` messages in `took`, beside each baseline.
    fn print(&self, what: &str, n: usize, took: Duration) {
        for (contender, raw) in &self.0 {
            print_ratio(
                &format!("{what} (raw: {})", contender.label()),
                n,
                took,
                *raw,
            );
        }
    }
}

/// One emitter sending `n` messages one by one to `key`, beside three baselines (the
/// library's loop, a socket loop, `redis-benchmark`), in rounds of [`PER_ROUND`] messages that
/// take turns: prints the figure against each (`runtime` names the runtime when it is not the
/// default one) and returns each single-client baseline's time for `n` messages, as
/// [`Baselines`], and the emitter.
async fn emit_one_by_one(
    fred: bool,
    key: &str,
    n: usize,
    raw: &mut Raw,
    runtime: &str,
) -> (Baselines, Arc<Emitter>) {
    const CONTENDERS: [Contender; 4] = [
        Contender::Ours,
        Contender::Library,
        Contender::Socket,
        Contender::RedisBenchmark,
    ];
    let body = JsonSerializer.serialize(&sample()).unwrap();
    let emitter = Emitter::new(driver(fred, key, |_| {}).await);
    let mut socket = SocketLoop::open().await;
    let rounds = (n / PER_ROUND).max(1);
    let mut took = [Duration::ZERO; 4];
    let mut cpu = [Duration::ZERO; 4];
    // Each round's ratio of each baseline: its time over ours in the same round.
    let mut ratios: [Vec<f64>; 4] = std::array::from_fn(|_| Vec::with_capacity(rounds));
    // Each message's time, of the contenders in this process: their medians do not move
    // with the machine's stalls, which the totals and even single rounds meet unevenly.
    let mut each: [Vec<Duration>; 4] =
        std::array::from_fn(|_| Vec::with_capacity(rounds * PER_ROUND));
    let mut missing_benchmark = false;
    for round in 0..rounds {
        let mut this_round = [Duration::ZERO; 4];
        for turn in 0..CONTENDERS.len() {
            let index = (round + turn) % CONTENDERS.len();
            let start = Instant::now();
            let cpu_before = cpu_time();
            match CONTENDERS[index] {
                Contender::Ours => {
                    for _ in 0..PER_ROUND {
                        let one = Instant::now();
                        emitter.emit(&sample(), DEFAULT_PRIORITY).await.unwrap();
                        each[index].push(one.elapsed());
                    }
                }
                Contender::Library | Contender::Socket => {
                    for i in 0..PER_ROUND {
                        let one = Instant::now();
                        let mut member = body.clone();
                        member.extend_from_slice(format!(" {round} {i}").as_bytes());
                        if CONTENDERS[index] == Contender::Library {
                            raw.sadd(key, &member).await;
                        } else {
                            socket.sadd(key, &member).await;
                        }
                        each[index].push(one.elapsed());
                    }
                }
                Contender::RedisBenchmark => match redis_benchmark(key, PER_ROUND, body.len()) {
                    Some(its_own) => this_round[index] = its_own,
                    None => missing_benchmark = true,
                },
            }
            if CONTENDERS[index] != Contender::RedisBenchmark {
                this_round[index] = start.elapsed();
                cpu[index] += cpu_time() - cpu_before;
            }
            took[index] += this_round[index];
        }
        for baseline in 1..CONTENDERS.len() {
            ratios[baseline].push(this_round[baseline].as_secs_f64() / this_round[0].as_secs_f64());
        }
        raw.del(&keys(key)).await;
    }
    let sent = rounds * PER_ROUND;
    let per_message = |cpu: Duration| cpu.as_secs_f64() * 1e6 / sent as f64;
    for baseline in 1..CONTENDERS.len() {
        let contender = CONTENDERS[baseline];
        if contender == Contender::RedisBenchmark && missing_benchmark {
            println!("{:<44} (redis-benchmark is not installed)", "");
            continue;
        }
        let ratios = &mut ratios[baseline];
        ratios.sort_by(f64::total_cmp);
        print_ratio(
            &format!("emit{runtime} (raw: {})", contender.label()),
            sent,
            took[0],
            took[baseline],
        );
        let cpu = if contender == Contender::RedisBenchmark {
            String::new()
        } else {
            format!(
                "{:.1} µs of client CPU per message (raw: {:.1} µs); ",
                per_message(cpu[0]),
                per_message(cpu[baseline])
            )
        };
        let medians = if contender == Contender::RedisBenchmark {
            String::new()
        } else {
            let (ours, theirs) = (median(&mut each[0]), median(&mut each[baseline]));
            format!(
                "; median time per message {:.1} µs (raw: {:.1} µs), ratio {:.2}",
                ours.as_secs_f64() * 1e6,
                theirs.as_secs_f64() * 1e6,
                theirs.as_secs_f64() / ours.as_secs_f64()
            )
        };
        println!(
            "{:<44} {cpu}median of the {rounds} rounds' ratios {:.2} (quartiles {:.2}, \
             {:.2}){medians}",
            "",
            ratios[rounds / 2],
            ratios[rounds / 4],
            ratios[rounds * 3 / 4],
        );
    }
    let baselines = Baselines(
        [1, 2, 3]
            .into_iter()
            .filter(|&i| !(CONTENDERS[i] == Contender::RedisBenchmark && missing_benchmark))
            .map(|i| (CONTENDERS[i], took[i]))
            .collect(),
    );
    (baselines, Arc::new(emitter))
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

    let (baselines, emitter) = emit_one_by_one(fred, &key, n, &mut raw, "").await;

    // Eight tasks on one driver (its connection pipelines them), and batches of 100, beside
    // the single-client loops.
    let cpu = cpu_time();
    let took = emit_from_tasks(emitter.clone(), 8, n / 8, sample).await;
    let cpu = cpu_time() - cpu;
    baselines.print("emit, 8 tasks", n / 8 * 8, took);
    println!(
        "{:<44} {:.1} µs of client CPU per message",
        "",
        cpu.as_secs_f64() * 1e6 / (n / 8 * 8) as f64
    );
    raw.del(&keys(&key)).await;
    let took = emit_in_batches(&emitter, n / 100, 100, sample).await;
    baselines.print("emit_batch of 100", n / 100 * 100, took);
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

    limit_cost(fred, &key, n).await;
    latency(fred, &key, &mut raw).await;
}

/// The cost of a limit that never binds: the same handling, each message admitted under a
/// concurrency limit of 1000 (its slot given up after), or under a rate of 10,000 per 100 ms
/// (one start recorded), beside a run without; five rounds of each, in turn, compared by
/// their medians.
async fn limit_cost(fred: bool, key: &str, n: usize) {
    let mut raw = Raw::open(fred).await;
    let kinds = [
        ("", Limits::new()),
        ("a concurrency limit", Limits::new().concurrency(1000)),
        (
            "a rate",
            Limits::new().rate(Rate::new(10_000, Duration::from_millis(100))),
        ),
    ];
    for concurrency in [1, 8] {
        let mut took = [Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..5 {
            for (i, (_, limits)) in kinds.iter().enumerate() {
                fill(key, n).await;
                let driver = Arc::new(driver(fred, key, |_| {}).await);
                let run = time_limited_dispatch(driver, "send-email", concurrency, n, *limits);
                took[i].push(run.await);
                // The limits' keys expire by themselves: a window of 100 ms is empty by the
                // next run.
                raw.del(&keys(key)).await;
            }
        }
        let [without, medians @ ..] = took.map(|mut runs| median(&mut runs));
        for ((label, _), with) in kinds[1..].iter().zip(medians) {
            println!(
                "{:<44} {:>9.0} msgs/s | without {:>9.0} msgs/s | cost {:.1}%",
                format!("handle with {label}, concurrency {concurrency}"),
                rate(n, with),
                rate(n, without),
                (1.0 - rate(n, with) / rate(n, without)) * 100.0
            );
        }
    }
}

/// No-op jobs handled at `concurrency`, keeping records for a minute or (with `records` false)
/// none.
async fn time_handling(
    driver: Arc<dyn Driver>,
    concurrency: usize,
    n: usize,
    records: bool,
) -> Duration {
    let mut dispatcher = Dispatcher::from_arc(driver)
        .concurrency(concurrency)
        .max_items(n as u64)
        .keep_outcomes(records.then_some(Duration::from_secs(60)));
    dispatcher.register_handler(
        "send-email",
        Arc::new(handler_fn(|_m: Message| async { Ok(true) })),
    );
    let start = Instant::now();
    dispatcher.handle(&[]).await.expect("the dispatcher failed");
    start.elapsed()
}

/// The cost of batch bookkeeping: `n` no-op jobs emitted and handled at concurrency 8 and 64 as one
/// batch (each settled in it, its callback sent once after the last), beside the same jobs
/// emitted and handled without a batch, with records kept and without; three rounds of each,
/// in turn, compared by their medians (emit and handling together, and handling alone).
async fn batch_cost(fred: bool, key: &str, n: usize) {
    for concurrency in [8, 64] {
        batch_cost_at(fred, key, n, concurrency).await;
    }
}

/// [`batch_cost`] at `concurrency`.
async fn batch_cost_at(fred: bool, key: &str, n: usize, concurrency: usize) {
    let mut raw = Raw::open(fred).await;
    let kinds = ["plain, no records", "plain, records", "one batch"];
    let mut total = [Vec::new(), Vec::new(), Vec::new()];
    let mut handling = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..3 {
        for (i, _) in kinds.iter().enumerate() {
            raw.del(&keys(key)).await;
            let driver: Arc<dyn Driver> = Arc::new(driver(fred, key, |_| {}).await);
            let emitter = Emitter::from_arc(driver.clone());
            let messages: Vec<Message> = (0..n).map(|_| sample()).collect();
            let start = Instant::now();
            let mut expected = n;
            if i == 2 {
                let batch = emitter
                    .open_batch(Batch::new().on_complete_message(&sample(), DEFAULT_PRIORITY))
                    .await
                    .expect("a batch");
                for chunk in messages.chunks(1000) {
                    batch
                        .add_messages(chunk, DEFAULT_PRIORITY)
                        .await
                        .expect("the batch's jobs");
                }
                batch.close().await.expect("closing the batch");
                expected += 1;
            } else {
                for chunk in messages.chunks(1000) {
                    emitter
                        .emit_batch(chunk, DEFAULT_PRIORITY)
                        .await
                        .expect("the jobs");
                }
            }
            let emitted = start.elapsed();
            let handled = time_handling(driver, concurrency, expected, i > 0).await;
            total[i].push(emitted + handled);
            handling[i].push(handled);
        }
    }
    raw.del(&keys(key)).await;
    let total = total.map(|mut runs| median(&mut runs));
    let handling = handling.map(|mut runs| median(&mut runs));
    for (i, kind) in kinds.iter().enumerate() {
        println!(
            "{:<44} {:>9.0} jobs/s emitted and handled | {:>9.0} jobs/s handled",
            format!("{n} jobs, {kind}, concurrency {concurrency}"),
            rate(n, total[i]),
            rate(n, handling[i]),
        );
    }
    for (base, label) in [(0, "plain without records"), (1, "plain with records")] {
        println!(
            "{:<44} {:.2} emitted and handled | {:.2} handled",
            format!("one batch against {label}"),
            rate(n, total[2]) / rate(n, total[base]),
            rate(n, handling[2]) / rate(n, handling[base]),
        );
    }
}

/// Latency: an idle worker, messages emitted one by one; polling as before wake-ups (every
/// 100 ms), and woken at the default settings, by a long-lived emitter and by processes that
/// each emit once and exit; and the commands an idle worker sends.
async fn latency(fred: bool, key: &str, raw: &mut Raw) {
    let key = key.to_owned();
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
        if wake_ups {
            let worker = Arc::new(driver(fred, &key, tweak).await);
            let (median, p90, p99) =
                idle_latency_of(worker, 100, Duration::from_millis(20), || {
                    emit_from_a_process(fred, &key)
                })
                .await;
            println!(
                "{:<44} median {median:.2?}, p90 {p90:.2?}, p99 {p99:.2?} ({label}, each from a process that emits once and exits)",
                "emit-to-handle latency, idle worker"
            );
            raw.del(&keys(&key)).await;
        }
        let per_second = idle_commands(Arc::new(driver(fred, &key, tweak).await)).await;
        println!(
            "{:<44} {per_second:.1} commands per second ({label}, refresh interval {refresh:?})",
            "idle worker"
        );
        raw.del(&keys(&key)).await;
    }
}

/// Set in a copy of this binary: emit one message on this key (`<fred>:<key>`) and exit.
const EMIT_ONCE: &str = "HERMES_BENCH_EMIT_ONCE";

/// Starts a copy of this binary that emits one `latency` message on `key` and exits at once,
/// and waits for it to end.
async fn emit_from_a_process(fred: bool, key: &str) {
    let status = tokio::process::Command::new(std::env::current_exe().unwrap())
        .env(EMIT_ONCE, format!("{fred}:{key}"))
        .status()
        .await
        .expect("starting an emitting process");
    assert!(status.success(), "an emitting process failed: {status}");
}

/// In a copy started by [`emit_from_a_process`]: connects, emits one message, and exits at
/// once, running no destructor.
fn emit_once(what: &str) -> ! {
    let (fred, key) = what.split_once(':').expect("<fred>:<key>");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let emitter = driver(fred == "true", key, |_| {}).await;
        emitter
            .send(&Message::new("latency"), DEFAULT_PRIORITY)
            .await
            .unwrap();
    });
    std::process::exit(0)
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
    let mut monitor = tokio::net::TcpStream::connect(address()).await.unwrap();
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

/// A runtime of two worker threads, as this machine's server has cores.
fn two_threads() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn main() {
    if let Ok(what) = std::env::var(EMIT_ONCE) {
        emit_once(&what);
    }
    let n: usize = std::env::var("HERMES_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let only = std::env::var("HERMES_BENCH_ONLY").unwrap_or_default();
    let emit_only = only == "emit";
    if only == "limits" {
        let runtime = two_threads();
        runtime.block_on(async {
            for fred in [false, true] {
                let key = format!("bench-limits-{:08x}", rand::random::<u32>());
                println!("-- {}", if fred { "fred" } else { "redis" });
                limit_cost(fred, &key, n).await;
            }
        });
        return;
    }
    if only == "batch" {
        let runtime = two_threads();
        runtime.block_on(async {
            for fred in [false, true] {
                let key = format!("bench-batch-{:08x}", rand::random::<u32>());
                println!("-- {}", if fred { "fred" } else { "redis" });
                batch_cost(fred, &key, n.min(10_000)).await;
            }
        });
        return;
    }
    if only == "latency" {
        let runtime = two_threads();
        runtime.block_on(async {
            for fred in [false, true] {
                let key = format!("bench-latency-{:08x}", rand::random::<u32>());
                let mut raw = Raw::open(fred).await;
                println!("-- {}", if fred { "fred" } else { "redis" });
                latency(fred, &key, &mut raw).await;
            }
        });
        return;
    }
    let multi_thread = two_threads();
    // On a worker thread, where a server's request handlers emit.
    let on_worker = multi_thread.spawn(async move {
        if emit_only {
            emit_alone(n, "multi-thread").await;
        } else {
            bench(false, n).await;
            bench(true, n).await;
        }
    });
    multi_thread.block_on(on_worker).unwrap();
    drop(multi_thread);
    let current_thread = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    current_thread.block_on(emit_alone(n, "current-thread"));
}
