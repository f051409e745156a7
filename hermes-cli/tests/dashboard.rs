//! `hermes dashboard` on a real queue (the filesystem driver, and Redis): the counts it shows
//! match the driver's, `/metrics` and `/api/stats` say the same, a dead letter is shown escaped
//! and replayed by its button's form (the worker's driver then receives it), a post without
//! the page's token is refused, and `--read-only` serves no action.

mod common;

use std::time::Duration;

use common::dashboard::{Dashboard, bury, token};
use hermes::fs::FileSystemDriver;
use hermes_core::{DEFAULT_PRIORITY, Driver, Message};

async fn the_dashboard_shows_and_repairs(url: &str, driver: &dyn Driver, queue_name: &str) {
    bury(driver, "dead-1", "card <b>declined</b>").await;
    for n in 0..2 {
        let message = Message::builder("report.export")
            .id(format!("w-{n}"))
            .build()
            .unwrap();
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    }
    let mut worker = hermes_core::workers::WorkerInfo::new(2, &[], Duration::from_secs(60));
    worker.handled = 5;
    driver
        .workers()
        .unwrap()
        .announce(&worker, Duration::from_secs(60))
        .await
        .unwrap();

    let dashboard = Dashboard::start(url, &[]);
    let overview = dashboard.get("/");
    assert!(overview.contains("id=\"waiting\">2<"), "{overview}");
    assert!(overview.contains("id=\"dead\">1<"), "{overview}");
    let api: serde_json::Value = serde_json::from_str(&dashboard.get("/api/stats")).unwrap();
    let queue = api["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["priority"] == DEFAULT_PRIORITY)
        .unwrap()
        .clone();
    let stats = driver.inspect().unwrap().stats().await.unwrap();
    let ours = stats
        .iter()
        .find(|q| q.priority == DEFAULT_PRIORITY)
        .unwrap();
    assert_eq!(
        queue["waiting"].as_u64(),
        ours.waiting.value(),
        "the driver's count"
    );
    assert_eq!(queue["dead"].as_u64(), Some(1));
    let metrics = dashboard.get("/metrics");
    assert!(
        metrics.contains(&format!(
            "hermes_queue_waiting{{queue=\"{queue_name}\",priority=\"100\"}} 2\n"
        )),
        "{metrics}"
    );
    assert!(dashboard.get("/workers").contains(&worker.id));

    // What the worker handles once the dashboard runs counts; the five before do not.
    assert!(overview.contains("id=\"handled\">0<"), "{overview}");
    worker.handled = 9;
    worker.failed = 1;
    driver
        .workers()
        .unwrap()
        .announce(&worker, Duration::from_secs(60))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let totals = loop {
        let api: serde_json::Value = serde_json::from_str(&dashboard.get("/api/overview")).unwrap();
        if api["totals"]["handled"] == "4" {
            break api;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the overview counts the messages handled since it started: {api}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(totals["totals"]["failed"], "1");
    assert_eq!(totals["totals"]["waiting"], "2");
    assert!(
        !totals["throughput"]["samples"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let metrics = dashboard.get("/metrics");
    assert!(
        metrics.contains(&format!(
            "hermes_worker_handled_total{{worker=\"{}\",host=\"{}\"}} 9\n",
            worker.id, worker.host
        )),
        "{metrics}"
    );
    assert!(
        dashboard
            .get("/assets/overview.js")
            .contains("/api/overview")
    );

    let dead = dashboard.get("/dead");
    assert!(dead.contains("dead-1"), "{dead}");
    assert!(
        dead.contains("card &lt;b&gt;declined&lt;/b&gt;") && !dead.contains("<b>declined"),
        "the error is escaped"
    );
    let shown = dashboard.get("/dead/show?priority=100&id=dead-1");
    assert!(
        shown.contains("card &lt;b&gt;declined&lt;/b&gt;") && shown.contains("charge"),
        "{shown}"
    );
    let (status, _) = dashboard.request("GET", "/dead/show?priority=100&id=nope", "");
    assert_eq!(status, 404);
    let token = token(&dead);
    let (status, _) = dashboard.request("POST", "/dead/replay", "id=dead-1&priority=100");
    assert_eq!(status, 422, "a form without a token is refused");
    let (status, _) = dashboard.request(
        "POST",
        "/dead/replay",
        &format!("token={}&id=dead-1&priority=100", "0".repeat(32)),
    );
    assert_eq!(
        status, 403,
        "another site's form has no token of this server"
    );
    assert_eq!(
        driver
            .dead_letters()
            .unwrap()
            .list(DEFAULT_PRIORITY, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    let (status, _) = dashboard.request(
        "POST",
        "/dead/replay",
        &format!("token={token}&id=dead-1&priority=100"),
    );
    assert_eq!(status, 303, "replayed, back to the list");
    assert!(
        driver
            .dead_letters()
            .unwrap()
            .list(DEFAULT_PRIORITY, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let mut seen = Vec::new();
    while let Some(d) = driver
        .receive(&[], Duration::from_millis(500))
        .await
        .unwrap()
    {
        seen.push((d.message().id().to_owned(), d.message().retries()));
        driver.ack(&d).await.unwrap();
    }
    assert!(seen.contains(&("dead-1".to_owned(), 0)), "{seen:?}");
    dashboard.stop();

    bury(driver, "dead-2", "again").await;
    let read_only = Dashboard::start(url, &["--read-only"]);
    let dead = read_only.get("/dead");
    assert!(dead.contains("dead-2") && !dead.contains("<form"), "{dead}");
    let (status, _) = read_only.request("POST", "/dead/replay", "token=x&id=dead-2");
    assert!(status == 404 || status == 405, "no action at all: {status}");
    read_only.stop();
    driver
        .workers()
        .unwrap()
        .withdraw(&worker.id)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_on_the_filesystem() {
    let dir = std::env::temp_dir().join(format!("hermes-dashboard-{}", std::process::id()));
    let url = format!("file://{}?queue=jobs", dir.display());
    let driver = FileSystemDriver::from_url(&url).unwrap();
    the_dashboard_shows_and_repairs(&url, &driver, "jobs").await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_on_redis() {
    let key = hermes_testkit::suite::unique_queue_name("dashboard");
    let base =
        std::env::var("HERMES_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let url = format!("{base}/0?key={key}&schedule_key={key}_schedule");
    let driver = hermes::redis::RedisSetDriver::from_url(&url)
        .await
        .expect("Redis");
    the_dashboard_shows_and_repairs(&url, &driver, &key).await;
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

#[test]
fn off_loopback_the_dashboard_starts_only_with_credentials() {
    let dir = std::env::temp_dir().join(format!("hermes-dashboard-off-{}", std::process::id()));
    let url = format!("file://{}?queue=jobs", dir.display());
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_hermes"))
        .args(["--url", &url, "dashboard", "--listen", "0.0.0.0:0"])
        .env_remove("HERMES_DASHBOARD_TOKEN")
        .env_remove("HERMES_DASHBOARD_USER")
        .env_remove("HERMES_DASHBOARD_PASSWORD")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "a usage error");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("HERMES_DASHBOARD_TOKEN"), "{said}");

    let secret = "a-token-of-the-operator-0123";
    let mut dashboard = Dashboard::start_with(
        &url,
        "0.0.0.0:0",
        &[],
        &[("HERMES_DASHBOARD_TOKEN", secret)],
    );
    let (status, body) = dashboard.request("GET", "/", "");
    assert_eq!(status, 401);
    assert!(!body.contains(secret));
    dashboard.authorization = Some("Bearer a-token-of-the-operator-0124".to_owned());
    assert_eq!(
        dashboard.request("GET", "/queues", "").0,
        401,
        "a wrong token"
    );
    dashboard.authorization = Some(format!("Bearer {secret}"));
    for path in [
        "/",
        "/queues",
        "/dead",
        "/workers",
        "/metrics",
        "/api/stats",
    ] {
        assert!(
            !dashboard.get(path).contains(secret),
            "{path} shows the token"
        );
    }
    dashboard.stop();

    let (user, password) = ("ops", "pass-word-0123");
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_hermes"))
        .args(["--url", &url, "dashboard", "--listen", "0.0.0.0:0"])
        .env_remove("HERMES_DASHBOARD_TOKEN")
        .env("HERMES_DASHBOARD_USER", user)
        .env_remove("HERMES_DASHBOARD_PASSWORD")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "a user without a password");
    let mut dashboard = Dashboard::start_with(
        &url,
        "0.0.0.0:0",
        &[],
        &[
            ("HERMES_DASHBOARD_USER", user),
            ("HERMES_DASHBOARD_PASSWORD", password),
        ],
    );
    assert_eq!(dashboard.request("GET", "/", "").0, 401);
    use base64::Engine;
    let pair = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    dashboard.authorization = Some(format!("Basic {pair}"));
    assert!(dashboard.get("/").contains("Overview"));
    dashboard.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a worker handled, as the dashboard's history shows it: the handled messages of every
/// minute of the last hour.
fn handled_in_history(dashboard: &Dashboard) -> u64 {
    let api: serde_json::Value = serde_json::from_str(&dashboard.get("/api/history")).unwrap();
    api["per_minute"]
        .as_array()
        .expect("the minutes")
        .iter()
        .map(|p| p["handled"].as_u64().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_is_the_backends_and_survives_a_restart() {
    let dir = std::env::temp_dir().join(format!("hermes-dashboard-history-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let url = format!("file://{}?queue=jobs", dir.display());
    let driver = FileSystemDriver::from_url(&url).unwrap();
    for n in 0..5 {
        let message = Message::builder("report.export")
            .id(format!("h-{n}"))
            .build()
            .unwrap();
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    }
    let mut options = hermes_core::DispatcherOptions::default();
    options.max_items = 5;
    let mut dispatcher = hermes_core::Dispatcher::new(driver.clone()).options(options);
    dispatcher.register_fn("report.export", |_| async { Ok(true) });
    dispatcher.handle(&[]).await.unwrap();

    let first = Dashboard::start(&url, &[]);
    assert_eq!(handled_in_history(&first), 5, "what the worker handled");
    let types = first.get("/types");
    assert!(
        types.contains("<td>report.export</td><td>5</td><td>0</td>"),
        "{types}"
    );
    let overview = first.get("/");
    assert!(overview.contains("id=\"per-minute\"") && overview.contains("msgs/min"));
    first.stop();

    let again = Dashboard::start(&url, &[]);
    assert_eq!(handled_in_history(&again), 5, "the same after a restart");
    again.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
