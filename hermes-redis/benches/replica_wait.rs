//! What the replica wait costs an emit: one emitter sending messages one by one to a master of
//! the bench's own that has one replica (both `redis-server` processes on loopback), with
//! [`RedisOptions::replica_wait`] off and on, for both client libraries, beside a raw client
//! of the `redis` crate sending the same `SADD`, and `SADD` followed by `WAIT 1 500`, in the
//! same run.
//!
//! `cargo bench -p hermes-redis --bench replica_wait` (`HERMES_BENCH_N` messages per figure,
//! default 5,000).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hermes_core::{DEFAULT_PRIORITY, Driver, JsonSerializer, Message, Serializer};
use hermes_redis::{RedisOptions, RedisSetDriver, ReplicaWait};
use hermes_testkit::bench::print_ratio;

/// The wait the figures use: one replica, 500 ms at most.
const WAIT_MS: u64 = 500;

/// A `redis-server` of the bench's own, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(settings: &[&str]) -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .args(settings)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is installed");
        let server = Server { child, port };
        let started = Instant::now();
        while server.info().is_none() {
            assert!(started.elapsed() < Duration::from_secs(10), "no answer");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn info(&self) -> Option<String> {
        let client = redis::Client::open(self.url()).ok()?;
        let mut connection = client.get_connection().ok()?;
        redis::cmd("INFO")
            .arg("replication")
            .query(&mut connection)
            .ok()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sample() -> Message {
    Message::builder("bench")
        .payload(&serde_json::json!({"user": 42, "action": "welcome"}))
        .build()
        .unwrap()
}

/// The time a raw connection takes for `n` `SADD`s, each followed by `WAIT` when `wait`.
async fn raw(url: &str, key: &str, n: usize, wait: bool) -> Duration {
    let client = redis::Client::open(url).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let body = JsonSerializer.serialize(&sample()).unwrap();
    let started = Instant::now();
    for _ in 0..n {
        let mut pipe = redis::pipe();
        pipe.cmd("SADD").arg(key).arg(&body);
        if wait {
            pipe.cmd("WAIT").arg(1).arg(WAIT_MS);
        }
        let replies: Vec<redis::Value> = pipe.query_async(&mut connection).await.unwrap();
        if wait {
            assert_eq!(replies.get(1), Some(&redis::Value::Int(1)), "the replica");
        }
    }
    started.elapsed()
}

/// The time a driver takes to emit `n` messages one by one.
async fn ours(url: &str, key: &str, n: usize, fred: bool, wait: bool) -> Duration {
    let mut options = RedisOptions::default();
    options.key = key.to_owned();
    options.schedule_key = format!("{key}_schedule");
    if wait {
        options.replica_wait = Some(ReplicaWait::new(1, Duration::from_millis(WAIT_MS)));
    }
    let driver = if fred {
        RedisSetDriver::connect_fred(url, options).await.unwrap()
    } else {
        RedisSetDriver::connect_redis(url, options).await.unwrap()
    };
    let started = Instant::now();
    for _ in 0..n {
        driver.send(&sample(), DEFAULT_PRIORITY).await.unwrap();
    }
    started.elapsed()
}

fn main() {
    let n: usize = std::env::var("HERMES_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
    let master = Server::start(&[]);
    let replica = Server::start(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let started = Instant::now();
    while !master
        .info()
        .is_some_and(|info| info.contains("state=online"))
    {
        assert!(started.elapsed() < Duration::from_secs(30), "no replica");
        std::thread::sleep(Duration::from_millis(50));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let url = master.url();
    runtime.block_on(async {
        println!("-- one emitter, a master with one replica ({n} messages per figure)");
        for fred in [false, true] {
            let library = if fred { "fred" } else { "redis" };
            let raw_plain = raw(&url, "bench-raw", n, false).await;
            let plain = ours(&url, &format!("bench-{library}"), n, fred, false).await;
            let raw_waiting = raw(&url, "bench-raw-wait", n, true).await;
            let waiting = ours(&url, &format!("bench-{library}-wait"), n, fred, true).await;
            print_ratio(
                &format!("emit, {library}, no wait (raw: SADD)"),
                n,
                plain,
                raw_plain,
            );
            print_ratio(
                &format!("emit, {library}, replica_wait=1 (raw: SADD+WAIT)"),
                n,
                waiting,
                raw_waiting,
            );
            println!(
                "{:<44} the wait adds {:.1} µs per emit ({:.2}x the time)",
                "",
                (waiting.as_secs_f64() - plain.as_secs_f64()) * 1e6 / n as f64,
                waiting.as_secs_f64() / plain.as_secs_f64()
            );
        }
    });
    drop(replica);
}
