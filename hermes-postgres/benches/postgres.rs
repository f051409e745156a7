//! PostgreSQL driver figures beside raw tokio-postgres loops in the same run, on a schema of
//! its own (`hermes_bench`, made afresh):
//!
//! - emit one by one (raw: the same `INSERT`, prepared, on one connection), and `emit_batch`
//!   of 100 against one by one;
//! - handle with a no-op handler at concurrency 1 and 8 (raw: as many connections, each
//!   looping on one statement that claims a row with `FOR UPDATE SKIP LOCKED` and deletes it);
//! - the idle emit-to-handle latency;
//! - the handle rate at a backlog of 1,000 and of `HERMES_BENCH_BACKLOG` (default 1,000,000;
//!   0 leaves it out), what a `stats` call costs there, and the table's size in MB after each
//!   of `HERMES_BENCH_ROUNDS` (default 3) such backlogs handled to the end, each followed by a
//!   quiet spell;
//! - client and server CPU per handled job (the server's: every `postgres` process on this
//!   machine, from `/proc`).
//!
//! `cargo bench -p hermes-postgres --bench postgres` (`HERMES_POSTGRES_URL`, `HERMES_BENCH_N`,
//! default 5,000 messages per figure).

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_core::{DEFAULT_PRIORITY, Driver, Emitter, JsonSerializer, Message, Serializer};
use hermes_postgres::{PostgresDriver, PostgresOptions};
use hermes_testkit::bench::{
    cpu_time, emit_in_batches, idle_latency, print_ratio, rate, time_dispatch,
};
use tokio_postgres::{Client, NoTls};

const SCHEMA: &str = "hermes_bench";

fn url() -> String {
    std::env::var("HERMES_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn sample() -> Message {
    Message::builder("send-email")
        .payload(&serde_json::json!({"to": "someone@example.com", "user_id": 12345}))
        .build()
        .unwrap()
}

async fn raw() -> Client {
    let (client, connection) = tokio_postgres::connect(&url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

async fn driver(queue: &str) -> PostgresDriver {
    let mut options = PostgresOptions::default();
    options.schema = SCHEMA.to_owned();
    PostgresDriver::connect(&url(), queue, options)
        .await
        .unwrap()
}

/// Rows of `queue` left.
async fn count(client: &Client, queue: &str) -> i64 {
    client
        .query_one(
            &format!("SELECT count(*) FROM {SCHEMA}.jobs WHERE queue = $1"),
            &[&queue],
        )
        .await
        .unwrap()
        .get(0)
}

/// The raw emit's statement: the same row, with the same `INSERT`.
async fn raw_insert(client: &Client) -> tokio_postgres::Statement {
    client
        .prepare(&format!(
            "INSERT INTO {SCHEMA}.jobs (queue, priority, due_at, body, message_id) \
             VALUES ($1, $2, extract(epoch FROM clock_timestamp())::float8, $3, $4)"
        ))
        .await
        .unwrap()
}

/// The raw emit: `n` rows inserted one by one on one connection.
async fn raw_emit(
    client: &Client,
    statement: &tokio_postgres::Statement,
    queue: &str,
    n: usize,
) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        let message = sample();
        let body = JsonSerializer.serialize(&message).unwrap();
        client
            .execute(
                statement,
                &[&queue, &DEFAULT_PRIORITY, &body, &message.id()],
            )
            .await
            .unwrap();
    }
    start.elapsed()
}

/// The raw worker: `concurrency` connections, each claiming and deleting one row per
/// statement until the queue is empty.
async fn raw_handle(queue: &str, concurrency: usize) -> Duration {
    let mut clients = Vec::new();
    for _ in 0..concurrency {
        clients.push(raw().await);
    }
    let start = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|client| {
            let queue = queue.to_owned();
            tokio::spawn(async move {
                let statement = client
                    .prepare(&format!(
                        "DELETE FROM {SCHEMA}.jobs WHERE id = (SELECT id FROM {SCHEMA}.jobs \
                         WHERE queue = $1 AND leased_until IS NULL \
                         AND due_at <= extract(epoch FROM clock_timestamp())::float8 \
                         ORDER BY due_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING body"
                    ))
                    .await
                    .unwrap();
                while let Some(row) = client.query_opt(&statement, &[&queue]).await.unwrap() {
                    let body: Vec<u8> = row.get(0);
                    std::hint::black_box(JsonSerializer.deserialize(&body).unwrap());
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    start.elapsed()
}

/// Fills `queue` with `n` messages, in batches of 1,000.
async fn fill(driver: &PostgresDriver, n: usize) {
    let batch: Vec<Message> = (0..1000).map(|_| sample()).collect();
    let mut left = n;
    while left > 0 {
        let take = left.min(1000);
        driver
            .send_batch(&batch[..take], DEFAULT_PRIORITY)
            .await
            .unwrap();
        left -= take;
    }
}

/// User and system CPU time of every `postgres` process on this machine.
fn server_cpu() -> Duration {
    let mut ticks = 0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        if !head.contains("(postgres") {
            continue;
        }
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        ticks += field(11) + field(12);
    }
    Duration::from_millis(ticks * 10)
}

/// The size of the jobs table with its indexes, in MB.
async fn table_mb(client: &Client) -> f64 {
    let bytes: i64 = client
        .query_one(
            &format!("SELECT pg_total_relation_size('{SCHEMA}.jobs')"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    bytes as f64 / 1e6
}

/// A quiet spell after a backlog was handled, as queues have between bursts: an idle worker
/// waits 15 s, in which the driver vacuums the table.
async fn quiet(driver: &PostgresDriver) {
    let found = driver.receive(&[], Duration::from_secs(15)).await.unwrap();
    assert!(found.is_none(), "the backlog was handled");
}

/// Handles `n` messages of a backlog of `backlog` at concurrency 8; returns the rate.
async fn handle_rate_at(client: &Client, queue: &str, backlog: usize, n: usize) -> f64 {
    let driver = driver(queue).await;
    fill(&driver, backlog).await;
    if backlog > 100_000 {
        println!(
            "a backlog of {backlog} filled: table and indexes {:.1} MB",
            table_mb(client).await
        );
    }
    client
        .batch_execute(&format!("VACUUM ANALYZE {SCHEMA}.jobs"))
        .await
        .unwrap();
    let took = time_dispatch(Arc::new(driver.clone()), "send-email", 8, n).await;
    rate(n, took)
}

#[tokio::main]
async fn main() {
    let n = env_count("HERMES_BENCH_N", 5000);
    let backlog = env_count("HERMES_BENCH_BACKLOG", 1_000_000);
    let client = raw().await;
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        .await
        .unwrap();
    let autovacuum: String = client
        .query_one("SHOW autovacuum", &[])
        .await
        .unwrap()
        .get(0);
    println!("the server's autovacuum: {autovacuum}; the driver's own vacuums (prune): on");
    let run = std::process::id();
    let queue = |what: &str| format!("bench_{what}_{run}");

    // Emit: rounds of 200 in which each contender takes its turn, so both meet the same
    // load of the machine and the same size of table.
    let emitter = Emitter::new(driver(&queue("emit")).await);
    let raw_queue = queue("raw_emit");
    let raw_insert = raw_insert(&client).await;
    let (mut ours, mut raw_took) = (Duration::ZERO, Duration::ZERO);
    let rounds = (n / 200).max(1);
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..200 {
            emitter.emit(&sample(), DEFAULT_PRIORITY).await.unwrap();
        }
        ours += start.elapsed();
        raw_took += raw_emit(&client, &raw_insert, &raw_queue, 200).await;
    }
    print_ratio("emit one by one", rounds * 200, ours, raw_took);
    let ours = ours * n as u32 / (rounds * 200) as u32;
    let batched = emit_in_batches(&emitter, n / 100, 100, sample).await;
    print_ratio("emit_batch of 100 (beside one by one)", n, batched, ours);

    // Handle.
    for concurrency in [1, 8] {
        let ours_queue = queue(&format!("handle{concurrency}"));
        let worker = driver(&ours_queue).await;
        fill(&worker, n).await;
        let client_before = cpu_time();
        let server_before = server_cpu();
        let ours = time_dispatch(Arc::new(worker.clone()), "send-email", concurrency, n).await;
        let client_cpu = cpu_time() - client_before;
        let server_cpu_used = server_cpu() - server_before;
        assert_eq!(
            count(&client, &ours_queue).await,
            0,
            "every message handled"
        );

        let raw_queue = queue(&format!("raw_handle{concurrency}"));
        fill(&driver(&raw_queue).await, n).await;
        let raw_client_before = cpu_time();
        let raw_server_before = server_cpu();
        let raw_took = raw_handle(&raw_queue, concurrency).await;
        let raw_client_cpu = cpu_time() - raw_client_before;
        let raw_server_cpu = server_cpu() - raw_server_before;
        print_ratio(
            &format!("handle, concurrency {concurrency}"),
            n,
            ours,
            raw_took,
        );
        let per_job = |cpu: Duration| cpu.as_secs_f64() * 1e6 / n as f64;
        println!(
            "  CPU per job: client {:.1} µs, server {:.1} µs | raw: client {:.1} µs, server {:.1} µs",
            per_job(client_cpu),
            per_job(server_cpu_used),
            per_job(raw_client_cpu),
            per_job(raw_server_cpu)
        );
    }

    // Idle latency.
    let worker = driver(&queue("latency")).await;
    let (median, p90, p99) = idle_latency(
        Arc::new(worker.clone()),
        Arc::new(worker.clone()),
        200,
        Duration::from_millis(20),
    )
    .await;
    println!(
        "idle latency, emit to handler: median {:.2} ms, p90 {:.2} ms, p99 {:.2} ms",
        median.as_secs_f64() * 1e3,
        p90.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );

    // Flat cost.
    if backlog > 0 {
        let small = handle_rate_at(&client, &queue("backlog_small"), 1000.max(n), n).await;
        let big_queue = queue("backlog_big");
        let big = handle_rate_at(&client, &big_queue, backlog, n).await;
        println!(
            "handle at a backlog of {}: {small:.0} msgs/s; at {backlog}: {big:.0} msgs/s (ratio {:.2})",
            1000.max(n),
            big / small
        );
        let inspect_driver = driver(&big_queue).await;
        let inspect = hermes_core::Driver::inspect(&inspect_driver).unwrap();
        // The first call opens a connection and prepares the statement.
        inspect.stats().await.unwrap();
        let start = Instant::now();
        let stats = inspect.stats().await.unwrap();
        println!(
            "a stats call at a backlog of {}: {:.1} ms",
            stats[0].waiting,
            start.elapsed().as_secs_f64() * 1e3
        );
        // Handle the rest of the backlog, then a second one as large.
        let left = usize::try_from(count(&client, &big_queue).await).unwrap();
        let start = Instant::now();
        time_dispatch(Arc::new(inspect_driver.clone()), "send-email", 8, left).await;
        let took = start.elapsed();
        quiet(&inspect_driver).await;
        println!(
            "handled the rest of the first backlog ({left}) at {:.0} msgs/s; table and indexes, once quiet: {:.1} MB",
            rate(left, took),
            table_mb(&client).await
        );
        for round in 2..=env_count("HERMES_BENCH_ROUNDS", 3) {
            fill(&inspect_driver, backlog).await;
            let filled = table_mb(&client).await;
            let start = Instant::now();
            time_dispatch(Arc::new(inspect_driver.clone()), "send-email", 8, backlog).await;
            let took = start.elapsed();
            quiet(&inspect_driver).await;
            println!(
                "backlog {round} of {backlog}: {filled:.1} MB filled, handled at {:.0} msgs/s; table and indexes, once quiet: {:.1} MB",
                rate(backlog, took),
                table_mb(&client).await
            );
        }
    }
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        .await
        .unwrap();
}
