//! The `hermes` command on Redis, through both client libraries and on the cluster: the table
//! and JSON outputs, each command's effect seen through the driver, the shutdown key, a
//! watched table, and a server that does not answer.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Target, dead_letters_round_trip, emit_stats_and_purge, ok};
use hermes::redis::RedisSetDriver;

fn redis_url() -> String {
    std::env::var("HERMES_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

fn cluster_url() -> String {
    std::env::var("HERMES_REDIS_CLUSTER_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:7001".to_owned())
}

fn unique(name: &str) -> String {
    hermes_testkit::suite::unique_queue_name(name)
}

async fn target(url: String) -> Target {
    let driver = RedisSetDriver::from_url(&url)
        .await
        .expect("Redis is reachable (the test command starts it)");
    Target {
        url,
        env: Vec::new(),
        driver: Arc::new(driver),
    }
}

/// The URL of a queue of its own: its keys are `<key>`, `<key>_schedule`, ...
fn queue_url(base: &str, key: &str, rest: &str) -> String {
    format!("{base}/0?key={key}&schedule_key={key}_schedule{rest}")
}

async fn delete_keys(key: &str) {
    let driver = RedisSetDriver::from_url(&redis_url()).await.unwrap();
    for suffix in [
        "",
        "_schedule",
        "_in_flight",
        "_dead",
        "_dead_letters",
        "_workers",
    ] {
        let name = format!("{key}{suffix}");
        driver
            .client()
            .command("DEL", &[name.as_bytes()])
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emit_stats_and_purge_on_each_client() {
    for client in ["redis", "fred"] {
        let key = unique("cli-stats");
        let url = queue_url(&redis_url(), &key, &format!("&client={client}"));
        emit_stats_and_purge(&target(url).await).await;
        delete_keys(&key).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_round_trip_on_each_client() {
    for client in ["redis", "fred"] {
        let key = unique("cli-dead");
        let url = queue_url(&redis_url(), &key, &format!("&client={client}"));
        dead_letters_round_trip(&target(url).await, "d-1").await;
        delete_keys(&key).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replaying_many_shows_progress_on_a_terminal_only() {
    let key = unique("cli-progress");
    let url = queue_url(&redis_url(), &key, "");
    common::replaying_many_shows_progress_on_a_terminal_only(&target(url).await).await;
    delete_keys(&key).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_work_on_the_cluster() {
    let key = unique("cli-cluster");
    let base = cluster_url().replacen("redis://", "redis+cluster://", 1);
    let url = format!("{base}?key={key}&schedule_key={key}_schedule&hash_tag={key}");
    let target = target(url).await;
    emit_stats_and_purge(&target).await;
    dead_letters_round_trip(&target, "c-1").await;
}

/// `shutdown` sets Hermes' `RedisShutdown` key, now or at `--at`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_sets_the_key_workers_watch() {
    let key = unique("cli-shutdown");
    let target = target(queue_url(&redis_url(), &key, "")).await;
    let signal = format!("{key}_shutdown");
    let out = ok(&target.hermes(&["shutdown", "--key", &signal, "--at", "2030-01-01T00:00:00Z"]));
    assert!(out.contains("2030-01-01T00:00:00Z"), "{out}");
    let client = RedisSetDriver::from_url(&redis_url())
        .await
        .unwrap()
        .client();
    let value = client.command("GET", &[signal.as_bytes()]).await.unwrap();
    assert_eq!(value.into_bytes(), Some(b"1893456000".to_vec()));
    ok(&target.hermes(&["shutdown", "--key", &signal]));
    let value = client.command("GET", &[signal.as_bytes()]).await.unwrap();
    let now = hermes_core::time::unix_now();
    let set: f64 = String::from_utf8(value.into_bytes().unwrap())
        .unwrap()
        .parse()
        .unwrap();
    assert!((now - set).abs() < 5.0, "now: {set} vs {now}");
    client.command("DEL", &[signal.as_bytes()]).await.unwrap();
}

/// `stats --watch` prints a fresh table every period until interrupted, then exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_watch_refreshes_until_interrupted() {
    let key = unique("cli-watch");
    let url = queue_url(&redis_url(), &key, "");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_hermes"))
        .args(["--url", &url, "stats", "--watch", "300ms", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let pid = child.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "interrupted is a normal end");
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 3, "{} refreshes", lines.len());
    assert!(lines.iter().all(|l| l["queues"][0]["name"] == key.as_str()));
}

#[test]
fn a_server_that_does_not_answer_fails_in_time() {
    let port = common::silent_port();
    common::unanswered_backend_fails_in_time(
        &format!("redis://:hunter2@127.0.0.1:{port}/0"),
        &[],
        "hunter2",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_are_listed_on_redis() {
    let key = unique("cli-workers");
    common::workers_are_listed(&target(queue_url(&redis_url(), &key, "")).await).await;
    delete_keys(&key).await;
}
