//! Processes that emit once and exit at once (as `hermes emit`, a cron script or a serverless
//! function do) wake an idle worker of another process: it claims each message within 100 ms,
//! on both client libraries, though its refresh interval is 10 s. And a poke still owed when a
//! driver is dropped or flushed goes before the drop or the flush returns.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Dispatcher, Driver, Message, handler_fn};
use hermes_redis::RedisSetDriver;

/// Set in a child process: the URL it emits one message to.
const CHILD_URL: &str = "HERMES_ONE_SHOT_URL";

/// How many processes emit, one after another.
const PROCESSES: u64 = 10;

/// The longest a message may wait for the idle worker.
const LIMIT: Duration = Duration::from_millis(100);

/// A queue of its own on the standalone server, read by `client`.
fn url(client: &str, key: &str, extra: &str) -> String {
    format!(
        "{}/0?key={key}&schedule_key={key}_schedule&client={client}{extra}",
        common::redis_url()
    )
}

fn fresh_key() -> String {
    format!(
        "oneshot-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )
}

/// In a child process: emits one message and exits at once, running no destructor and
/// leaving no task to finish. Returns when this process is not a child.
async fn emit_once_if_child() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let driver = RedisSetDriver::from_url(&url)
        .await
        .expect("Redis is running");
    driver
        .send(&Message::new("one-shot"), DEFAULT_PRIORITY)
        .await
        .expect("sending");
    std::process::exit(0);
}

async fn idle_worker_takes_each_message_at_once(test: &str, client: &str) {
    emit_once_if_child().await;
    let key = fresh_key();
    let worker = RedisSetDriver::from_url(&url(client, &key, "&refresh_interval=10"))
        .await
        .expect("Redis is running");
    let waits: Arc<Mutex<Vec<f64>>> = Arc::default();
    let record = waits.clone();
    let mut dispatcher = Dispatcher::new(worker).max_items(PROCESSES);
    dispatcher.register_handler(
        "one-shot",
        Arc::new(handler_fn(move |m: Message| {
            let record = record.clone();
            async move {
                record.lock().unwrap().push(unix_now() - m.created());
                Ok(true)
            }
        })),
    );
    let running = tokio::spawn(async move { dispatcher.handle(&[]).await });
    let exe = std::env::current_exe().expect("the test binary");
    for _ in 0..PROCESSES {
        // Long enough for the worker to be waiting again.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let status = tokio::process::Command::new(&exe)
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_URL, url(client, &key, ""))
            .stdout(std::process::Stdio::null())
            .status()
            .await
            .expect("starting an emitting process");
        assert!(status.success(), "an emitting process failed: {status}");
    }
    // A message the worker never finds ends the run at the refresh interval at the latest.
    tokio::time::timeout(Duration::from_secs(15), running)
        .await
        .expect("the worker took every message")
        .expect("the worker task")
        .expect("the worker");
    let waits = waits.lock().unwrap().clone();
    println!("{client}: waits of the messages of {PROCESSES} one-emit processes (s): {waits:?}");
    assert_eq!(waits.len(), PROCESSES as usize);
    for wait in waits {
        assert!(
            wait <= LIMIT.as_secs_f64(),
            "{client}: a message of a process that emitted once and exited waited {wait:.3} s"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_emit_processes_wake_an_idle_worker_on_the_redis_crate() {
    idle_worker_takes_each_message_at_once(
        "one_emit_processes_wake_an_idle_worker_on_the_redis_crate",
        "redis",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_emit_processes_wake_an_idle_worker_on_fred() {
    idle_worker_takes_each_message_at_once(
        "one_emit_processes_wake_an_idle_worker_on_fred",
        "fred",
    )
    .await;
}

/// The length of the wake list of `key`: 1 when a token waits for a worker.
async fn tokens(raw: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("LLEN")
        .arg(format!("{key}_wake"))
        .query_async(raw)
        .await
        .expect("LLEN")
}

/// Leaves a poke owed: sends while no worker takes the token, each poke finding it still
/// there, until pokes are 64 ms apart; then the token is taken away, as an idle worker would
/// take it, and one more message is sent, within the gap.
async fn owe_a_poke(
    driver: &RedisSetDriver,
    raw: &mut redis::aio::MultiplexedConnection,
    key: &str,
) {
    for round in 0..8 {
        if round > 0 {
            tokio::time::sleep(Duration::from_millis(70)).await;
        }
        driver
            .send(&Message::new("early"), DEFAULT_PRIORITY)
            .await
            .expect("sending");
        assert_eq!(tokens(raw, key).await, 1, "the send carried its poke");
    }
    let _: i64 = redis::cmd("DEL")
        .arg(format!("{key}_wake"))
        .query_async(raw)
        .await
        .expect("DEL");
    driver
        .send(&Message::new("owed"), DEFAULT_PRIORITY)
        .await
        .expect("sending");
    assert_eq!(tokens(raw, key).await, 0, "the poke is owed");
}

// On one thread, so the task that sends owed pokes cannot run between the last check and the
// drop.
#[tokio::test(flavor = "current_thread")]
async fn a_poke_still_owed_goes_with_the_drop_or_the_flush() {
    let mut raw = common::raw().await.expect("Redis is reachable");
    for client in ["redis", "fred"] {
        for ending in ["drop", "flush"] {
            let key = fresh_key();
            let driver = RedisSetDriver::from_url(&url(client, &key, ""))
                .await
                .expect("Redis is running");
            owe_a_poke(&driver, &mut raw, &key).await;
            if ending == "drop" {
                drop(driver);
            } else {
                driver.flush().await.expect("flushing");
            }
            assert_eq!(
                tokens(&mut raw, &key).await,
                1,
                "{client}: the {ending} sent the poke"
            );
            let _: i64 = redis::cmd("DEL")
                .arg(&key)
                .arg(format!("{key}_wake"))
                .query_async(&mut raw)
                .await
                .expect("DEL");
        }
    }
}
