//! The Limits page (each limit's use now, a key's looked up), the Cron page's "Run now", and
//! each queue's latency over time on the overview, on the in-memory driver.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use common::{announce_entry, get, post, token};
use hermes_core::flow::{Limits, Rate};
use hermes_core::history::Recorder;
use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Dispatcher, Driver, HandlerError, Message};
use hermes_dashboard::Dashboard;
use hermes_testkit::MemoryDriver;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// Polls `path` until its body holds `wanted`, for up to 10 s; the last body.
async fn until_shown(app: &axum::Router, path: &str, wanted: &str) -> String {
    let mut body = String::new();
    for _ in 0..100 {
        body = get(app, path).await.body;
        if body.contains(wanted) {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{wanted} never shown on {path}: {body}");
}

#[tokio::test]
async fn the_limits_page_shows_each_limits_use_now() {
    let driver = MemoryDriver::new();
    let app = Dashboard::new(Arc::new(driver.clone())).router();
    assert!(
        get(&app, "/limits")
            .await
            .body
            .contains("No running worker announces limits")
    );
    let hostile = "<img src=x onerror=alert(1)>";
    for n in 0..3 {
        let message = Message::builder("call-api")
            .id(format!("c-{n}"))
            .limit_key(hostile)
            .build()
            .unwrap();
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    }
    let gate = Arc::new(Semaphore::new(0));
    let mut dispatcher = Dispatcher::new(driver.clone()).concurrency(4);
    dispatcher
        .limit(
            "call-api",
            Limits::new()
                .concurrency(2)
                .rate(Rate::per_minute(100))
                .concurrency_per_key(5),
        )
        .unwrap();
    let held = gate.clone();
    dispatcher.register_fn("call-api", move |_| {
        let held = held.clone();
        async move {
            let _pass = held.acquire().await.map_err(HandlerError::msg)?;
            Ok::<_, HandlerError>(true)
        }
    });
    let stop = dispatcher.cancellation_token();
    let worker = tokio::spawn(async move { dispatcher.handle(&[]).await });

    let page = until_shown(&app, "/limits", "2 of 2 running").await;
    for shown in [
        "call-api",
        "2 at once",
        "100 per 1m",
        "2 of 100 started in the last 1m",
        "per key: look one up below",
    ] {
        assert!(page.contains(shown), "{shown}: {page}");
    }
    let key = url_encoded(hostile);
    let keyed = get(&app, &format!("/limits?type=call-api&key={key}")).await;
    assert_eq!(keyed.status, StatusCode::OK);
    assert!(
        keyed.body.contains("2 of 5 running for"),
        "the key's own use: {}",
        keyed.body
    );
    assert!(
        !keyed.body.contains(hostile),
        "a key is shown as text: {}",
        keyed.body
    );
    let long = get(
        &app,
        &format!("/limits?type=call-api&key={}", "k".repeat(300)),
    )
    .await;
    assert!(long.body.contains("at most 256 bytes"), "{}", long.body);

    gate.add_permits(3);
    until_shown(&app, "/limits", "0 of 2 running").await;
    stop.cancel();
    worker.await.unwrap().unwrap();
}

fn url_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn run_now_emits_a_cron_entrys_message_at_once() {
    let driver = MemoryDriver::new();
    announce_entry(&driver).await;
    let app = Dashboard::new(Arc::new(driver.clone())).router();
    let page = get(&app, "/cron").await.body;
    assert!(page.contains(">Run now</button>"), "{page}");
    let token = token(&page);

    let wrong = post(&app, "/cron/run", "token=nope&name=nightly-export").await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    let unknown = post(&app, "/cron/run", &format!("token={token}&name=other")).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(
        driver.receive(&[], Duration::ZERO).await.unwrap().is_none(),
        "refused posts emit nothing"
    );

    let ran = post(
        &app,
        "/cron/run",
        &format!("token={token}&name=nightly-export"),
    )
    .await;
    assert_eq!(ran.status, StatusCode::SEE_OTHER);
    let delivery = driver
        .receive(&[], Duration::ZERO)
        .await
        .unwrap()
        .expect("the entry's message");
    let message = delivery.message();
    assert_eq!(message.message_type(), "report.export");
    assert_eq!(message.payload(), Some(&json!({ "report": "sales" })));
    assert!(
        message.id().starts_with("cron-nightly-export-now-"),
        "{}",
        message.id()
    );
    assert!(message.due() <= unix_now());

    let read_only = Dashboard::new(Arc::new(driver.clone()))
        .read_only(true)
        .router();
    assert!(!get(&read_only, "/cron").await.body.contains("Run now"));
    let refused = post(
        &read_only,
        "/cron/run",
        &format!("token={token}&name=nightly-export"),
    )
    .await;
    assert!(refused.status.is_client_error(), "{}", refused.status);
}

#[tokio::test]
async fn the_overview_charts_each_queues_latency_over_time() {
    let driver = MemoryDriver::new();
    let app = Dashboard::new(Arc::new(driver.clone())).router();
    let recorder = Recorder::new();
    let now = unix_now();
    for ms in [700, 700, 700, 40_000] {
        recorder.waited(
            "report.export",
            DEFAULT_PRIORITY,
            Duration::from_millis(ms),
            now,
        );
    }
    recorder.flush(driver.counters().unwrap()).await.unwrap();

    let page = get(&app, "/").await.body;
    assert!(page.contains("Latency per queue"), "{page}");
    assert!(page.contains("id=\"waits-per-minute\""), "{page}");
    assert!(page.contains("<path class=\"line-0\""), "{page}");
    assert!(page.contains("60000 ms</title>"), "the p95 wait: {page}");

    let history: Value = serde_json::from_str(&get(&app, "/api/history").await.body).unwrap();
    let queue = &history["waits_per_minute"][0];
    assert_eq!(queue["priority"], DEFAULT_PRIORITY);
    let last = queue["points"].as_array().unwrap().last().unwrap();
    assert_eq!(
        (&last["p50_ms"], &last["p95_ms"]),
        (&json!(1000), &json!(60000))
    );
    assert_eq!(history["waits_per_hour"][0]["priority"], DEFAULT_PRIORITY);
}
