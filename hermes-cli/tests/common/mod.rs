//! Shared by the `hermes` command's tests on real servers: running the command on a queue, and
//! the scenarios every backend goes through, each checked through the driver itself.

#![allow(dead_code, unreachable_pub)]

pub mod dashboard;

use std::io::Read;
use std::net::TcpListener;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_core::inspect::{DeadKind, DeadReason};
use hermes_core::{DEFAULT_PRIORITY, Driver, Message};
use serde_json::Value;

/// A queue the command runs on: its URL, the environment the command needs, and the same
/// queue opened by the test.
pub struct Target {
    pub url: String,
    pub env: Vec<(&'static str, String)>,
    pub driver: Arc<dyn Driver>,
}

impl Target {
    /// Runs `hermes <args>` on the queue.
    pub fn hermes(&self, args: &[&str]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hermes"));
        command.env("HERMES_URL", &self.url);
        for (name, value) in &self.env {
            command.env(name, value);
        }
        command.args(args).output().expect("running hermes")
    }
}

/// The standard output of a run that succeeded.
pub fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// The JSON a run printed.
pub fn json(output: &Output) -> Value {
    serde_json::from_str(&ok(output)).unwrap()
}

/// A figure of `hermes stats --json`: a number, `{"approximate": n}`, or null.
pub fn figure(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| value["approximate"].as_u64())
}

/// Checks a figure: exactly `want` when exact, within one when approximate; unknown passes.
fn assert_figure(value: &Value, want: u64, what: &str) {
    match (value.as_u64(), figure(value)) {
        (Some(exact), _) => assert_eq!(exact, want, "{what}"),
        (None, Some(approximate)) => assert!(approximate.abs_diff(want) <= 1, "{what}: {value}"),
        (None, None) => assert!(value.is_null(), "{what}: {value}"),
    }
}

/// The default queue's figures from `hermes stats --json`.
fn default_queue(target: &Target) -> Value {
    let stats = json(&target.hermes(&["stats", "--json"]));
    assert_eq!(stats["driver"], target.driver.name());
    stats["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["priority"] == DEFAULT_PRIORITY)
        .cloned()
        .expect("the default queue")
}

/// `emit` queues what it prints, `stats` counts it as a table and as JSON, and `purge` empties
/// the waiting messages (and only after `--yes`), each seen through the driver.
pub async fn emit_stats_and_purge(target: &Target) {
    let out = ok(&target.hermes(&[
        "emit",
        "report.export",
        "--payload",
        r#"{"report":"sales"}"#,
        "--count",
        "3",
    ]));
    let ids: Vec<String> = out.lines().map(str::to_owned).collect();
    assert_eq!(ids.len(), 3, "{out}");
    ok(&target.hermes(&["emit", "report.export", "--delay", "90s"]));

    let table = ok(&target.hermes(&["stats"]));
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "queue", "priority", "waiting", "delayed", "in", "flight", "dead", "latency"
        ]
    );
    let queue = default_queue(target);
    assert_figure(&queue["waiting"], 3, "waiting");
    assert_figure(&queue["delayed"], 1, "delayed");
    let row = table
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("100"))
        .expect("a row for the default queue");
    let waiting = row.split_whitespace().nth(2).unwrap();
    assert!(["3", "~3", "~2", "~4", "?"].contains(&waiting), "{table}");

    let peeked = target.hermes(&["peek", "--json"]);
    if target.driver.browse().is_some() {
        let mut listed: Vec<String> = json(&peeked)
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect();
        listed.sort();
        let mut sent = ids.clone();
        sent.sort();
        assert_eq!(listed, sent, "peek lists what emit queued");
    } else {
        assert_eq!(peeked.status.code(), Some(1), "peek is unsupported here");
        let err = String::from_utf8_lossy(&peeked.stderr);
        assert!(err.contains("not support"), "{err}");
    }
    assert_figure(&default_queue(target)["waiting"], 3, "a peek takes nothing");

    let refused = target.hermes(&["purge", "--state", "waiting"]);
    assert_eq!(refused.status.code(), Some(2), "a purge needs --yes");
    assert_figure(
        &default_queue(target)["waiting"],
        3,
        "nothing purged without --yes",
    );
    assert!(ok(&target.hermes(&["purge", "--state", "waiting", "--yes"])).contains("purged"));
    let left = target
        .driver
        .receive(&[], Duration::from_secs(1))
        .await
        .unwrap();
    assert!(left.is_none(), "no waiting message is left: {left:?}");
    assert_figure(
        &default_queue(target)["delayed"],
        1,
        "the delayed one stays",
    );
}

/// A failed message is listed by `dead ls` with its reason, shown by `dead show`, and
/// `dead replay` puts it back for the driver to receive, retries reset; `dead purge --yes`
/// empties the store.
pub async fn dead_letters_round_trip(target: &Target, id: &str) {
    let driver = &target.driver;
    let message = Message::builder("charge")
        .id(id)
        .payload(&serde_json::json!({"cents": 5}))
        .retries(3)
        .build()
        .unwrap();
    driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    let delivery = driver
        .receive(&[], Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the message");
    let reason = DeadReason::new(DeadKind::Failed, "card declined")
        .with_handler("Billing")
        .with_retries(3);
    driver
        .dead_letters()
        .unwrap()
        .add(&delivery, &reason)
        .await
        .unwrap();

    let table = ok(&target.hermes(&["dead", "ls"]));
    assert!(
        table.contains(id) && table.contains("card declined"),
        "{table}"
    );
    let listed = json(&target.hermes(&["dead", "ls", "--json"]));
    let letter = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == id)
        .expect("listed");
    assert_eq!(letter["handler"], "Billing");
    assert_eq!(letter["kind"], "failed");
    let shown = json(&target.hermes(&["dead", "show", id]));
    assert_eq!(shown["message"]["payload"]["cents"], 5);
    assert_eq!(
        target.hermes(&["dead", "show", "nope"]).status.code(),
        Some(1)
    );

    assert!(ok(&target.hermes(&["dead", "replay", id])).contains("replayed 1"));
    let back = driver
        .receive(&[], Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the replayed message");
    assert_eq!((back.message().id(), back.message().retries()), (id, 0));
    driver.ack(&back).await.unwrap();
    assert!(
        !ok(&target.hermes(&["dead", "ls"])).contains(id),
        "replayed, so no longer dead"
    );

    driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    let again = driver
        .receive(&[], Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the message");
    driver
        .dead_letters()
        .unwrap()
        .add(&again, &reason)
        .await
        .unwrap();
    assert_eq!(target.hermes(&["dead", "purge"]).status.code(), Some(2));
    ok(&target.hermes(&["dead", "purge", "--yes"]));
    assert!(
        driver
            .dead_letters()
            .unwrap()
            .list(DEFAULT_PRIORITY, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A port on loopback that accepts connections and never answers.
pub fn silent_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            let mut reader = stream.try_clone().unwrap();
            std::thread::spawn(move || {
                let mut sink = [0_u8; 1024];
                while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
            });
            held.push(stream);
        }
    });
    port
}

/// `hermes stats` on `url`, a backend that does not answer, fails with status 1 and one line
/// within a few seconds of `--timeout`, and the line holds no password.
pub fn unanswered_backend_fails_in_time(url: &str, env: &[(&'static str, String)], password: &str) {
    let started = Instant::now();
    let mut command = Command::new(env!("CARGO_BIN_EXE_hermes"));
    for (name, value) in env {
        command.env(name, value);
    }
    let out = command
        .args(["--url", url, "--timeout", "2s", "stats"])
        .output()
        .unwrap();
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(took < Duration::from_secs(8), "took {took:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains(password), "{err}");
}

/// `workers` lists an announced worker with what it runs, as a table and as JSON, and stops
/// listing it once withdrawn; on a backend without live workers it says so, status 1.
pub async fn workers_are_listed(target: &Target) {
    let mut worker =
        hermes_core::workers::WorkerInfo::new(3, &[DEFAULT_PRIORITY], Duration::from_secs(60));
    worker
        .running
        .push(hermes_core::workers::RunningMessage::new(
            "m-7",
            "report.export",
            1.0,
        ));
    worker.busy = 1;
    if target.driver.workers().is_none() {
        let out = target.hermes(&["workers", "--json"]);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("does not support live workers"), "{err}");
        // What the broker can say instead: each queue's consumers, where it counts them.
        let stats = target.driver.inspect().unwrap().stats().await.unwrap();
        let out = target.hermes(&["workers"]);
        if stats.iter().all(|q| q.consumers.value().is_none()) {
            assert_eq!(out.status.code(), Some(1));
            return;
        }
        let table = ok(&out);
        assert!(table.contains("lists no workers"), "{table}");
        for q in &stats {
            assert!(
                table.lines().any(|l| l.starts_with(q.name.as_str())
                    && l.split_whitespace().last() == Some(q.consumers.to_string().as_str())),
                "{} with {} consumers: {table}",
                q.name,
                q.consumers
            );
        }
        return;
    }
    target
        .driver
        .workers()
        .unwrap()
        .announce(&worker, Duration::from_secs(60))
        .await
        .unwrap();
    let table = ok(&target.hermes(&["workers"]));
    assert!(
        table.contains(&worker.id) && table.contains("m-7 (report.export)"),
        "{table}"
    );
    assert!(table.contains("1/3"), "{table}");
    let listed = json(&target.hermes(&["workers", "--json"]));
    let found = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == worker.id.as_str())
        .expect("listed");
    assert_eq!(found["running"][0]["type"], "report.export");
    assert_eq!(found["pid"], std::process::id());
    target
        .driver
        .workers()
        .unwrap()
        .withdraw(&worker.id)
        .await
        .unwrap();
    assert!(!ok(&target.hermes(&["workers"])).contains(&worker.id));
}

/// `count` dead letters `<prefix>-0`… on the default queue, put there one at a time.
pub async fn bury(target: &Target, prefix: &str, count: usize) {
    let reason = DeadReason::new(DeadKind::Failed, "declined");
    let dead = target.driver.dead_letters().expect("dead letters");
    for n in 0..count {
        let message = Message::builder("charge")
            .id(format!("{prefix}-{n}"))
            .build()
            .unwrap();
        target
            .driver
            .send(&message, DEFAULT_PRIORITY)
            .await
            .unwrap();
        let delivery = target
            .driver
            .receive(&[], Duration::from_secs(5))
            .await
            .unwrap()
            .expect("the message just sent");
        dead.add(&delivery, &reason).await.unwrap();
    }
}

/// A replay of many shows a bar on a terminal (the command run under `script`, which gives it
/// one) and nothing when its output is not one; both replay every letter.
pub async fn replaying_many_shows_progress_on_a_terminal_only(target: &Target) {
    let dead = target.driver.dead_letters().expect("dead letters");
    bury(target, "plain", 1_200).await;
    let plain = target.hermes(&["dead", "replay", "--all"]);
    assert!(ok(&plain).contains("replayed 1200 dead letters"));
    assert!(
        plain.stderr.is_empty(),
        "no bar off a terminal: {}",
        String::from_utf8_lossy(&plain.stderr)
    );
    assert!(dead.list(DEFAULT_PRIORITY, 10).await.unwrap().is_empty());
    let inspect = target.driver.inspect().expect("inspect");
    inspect
        .purge(DEFAULT_PRIORITY, hermes_core::inspect::QueueState::Waiting)
        .await
        .unwrap();

    bury(target, "shown", 1_200).await;
    let mut command = format!("'{}' dead replay --all", env!("CARGO_BIN_EXE_hermes"));
    for (name, value) in [("HERMES_URL", target.url.as_str())]
        .into_iter()
        .chain(target.env.iter().map(|(n, v)| (*n, v.as_str())))
    {
        command = format!("{name}='{value}' {command}");
    }
    let on_terminal = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .output()
        .expect("running script (util-linux)");
    let shown = String::from_utf8_lossy(&on_terminal.stdout);
    assert!(on_terminal.status.success(), "{shown}");
    assert!(shown.contains("replayed 1200 dead letters"), "{shown}");
    assert!(
        shown.contains("replaying [") && shown.contains("/1200"),
        "a bar on a terminal: {shown}"
    );
    assert!(dead.list(DEFAULT_PRIORITY, 10).await.unwrap().is_empty());
    inspect
        .purge(DEFAULT_PRIORITY, hermes_core::inspect::QueueState::Waiting)
        .await
        .unwrap();
}
