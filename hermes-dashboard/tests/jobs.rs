//! A queue's jobs on the dashboard (the in-memory driver): pages from the backend with their
//! cursors, the type filter, the search by id, one job's page, foreign text escaped, a huge
//! payload cut, and each action on a selection checked in the backend afterwards.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use common::{bury, dead_ids, get, post, token};
use hermes_core::flow::PauseTarget;
use hermes_core::inspect::{PageRequest, QueueState};
use hermes_core::{DEFAULT_PRIORITY, Driver, Message};
use hermes_dashboard::Dashboard;
use hermes_testkit::MemoryDriver;
use serde_json::json;

fn app(driver: &MemoryDriver) -> Router {
    Dashboard::new(Arc::new(driver.clone())).router()
}

/// How many jobs a list page shows.
fn rows(page: &str) -> usize {
    page.matches("class=\"job\"").count()
}

/// The href of the link of `class` on `page`, unescaped.
fn href(page: &str, class: &str) -> Option<String> {
    let at = page.find(&format!("class=\"{class}\" href=\""))? + class.len() + 15;
    let end = at + page[at..].find('"')?;
    Some(page[at..end].replace("&amp;", "&"))
}

async fn waiting_ids(driver: &MemoryDriver) -> Vec<String> {
    let page = driver
        .browse()
        .unwrap()
        .page(
            DEFAULT_PRIORITY,
            &PageRequest::new(QueueState::Waiting, 1000),
        )
        .await
        .unwrap();
    page.messages.iter().map(|m| m.id().to_owned()).collect()
}

#[tokio::test]
async fn a_queue_lists_its_jobs_a_page_at_a_time() {
    let driver = MemoryDriver::new();
    for n in 0..120 {
        let kind = if n % 4 == 0 {
            "report.export"
        } else {
            "mail.send"
        };
        let message = Message::builder(kind)
            .id(format!("job-{n:03}"))
            .payload(&json!({ "n": n }))
            .build()
            .unwrap();
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    }
    let app = app(&driver);
    let queues = get(&app, "/queues").await.body;
    let queue = href(&queues, "queue").expect("the queue's link");
    let first = get(&app, &queue).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(rows(&first.body), 50);
    assert!(first.body.contains("job-000") && !first.body.contains("job-050"));
    assert!(
        first
            .body
            .contains("waiting <span class=\"count\">120</span>")
    );
    let second = get(&app, &href(&first.body, "next").expect("a next page"))
        .await
        .body;
    assert_eq!(rows(&second), 50);
    assert!(second.contains("job-050") && !second.contains("job-000"));
    assert!(href(&second, "first").is_some());
    let third = get(&app, &href(&second, "next").unwrap()).await.body;
    assert_eq!(rows(&third), 20);
    assert!(href(&third, "next").is_none(), "the last page");

    assert!(
        first.body.contains("<main data-live>"),
        "the list refreshes live"
    );
    assert!(
        first.body.contains("id=\"live\""),
        "with a button pausing it"
    );
    let live = get(&app, "/assets/live.js").await;
    assert!(live.body.contains("hermes-live"));
    let exports = get(&app, "/queue?priority=100&state=waiting&type=report.export")
        .await
        .body;
    assert_eq!(rows(&exports), 30);
    assert!(!exports.contains("mail.send<"), "only the type asked for");

    let job = get(&app, "/job?priority=100&id=job-007").await;
    assert_eq!(job.status, StatusCode::OK);
    assert!(job.body.contains("mail.send") && job.body.contains("&quot;n&quot;: 7"));
    assert!(job.body.contains("formaction=\"/jobs/cancel\""));
    let missing = get(&app, "/job?priority=100&id=nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(
        get(&app, "/queue?priority=7").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get(&app, "/queue?state=bogus").await.status,
        StatusCode::BAD_REQUEST
    );
    let bogus = get(&app, "/queue?priority=100&cursor=%3Cnot%3E").await;
    assert_eq!(bogus.status, StatusCode::BAD_GATEWAY);
    assert!(!bogus.body.contains("<not>"));
}

#[tokio::test]
async fn foreign_text_is_escaped_and_huge_payloads_cut() {
    let driver = MemoryDriver::new();
    let hostile = Message::builder("<script>alert(1)</script>")
        .id("\"><img src=x onerror=alert(2)>")
        .payload(&json!({ "note": "</code><svg onload=alert(3)>" }))
        .build()
        .unwrap();
    driver.send(&hostile, DEFAULT_PRIORITY).await.unwrap();
    let huge = Message::builder("blob")
        .id("huge")
        .payload(&json!({ "data": "x".repeat(2 * 1024 * 1024) }))
        .build()
        .unwrap();
    driver.send(&huge, DEFAULT_PRIORITY).await.unwrap();
    let app = app(&driver);

    let list = get(&app, "/queue").await.body;
    for raw in ["<script>alert", "<img src=x", "<svg onload"] {
        assert!(!list.contains(raw), "{raw} shown as markup");
    }
    assert!(list.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(
        list.len() < 100_000,
        "the list holds the payload whole: {} bytes",
        list.len()
    );
    assert!(list.contains("(2.0 MiB)"), "the size of the cut payload");

    let job = get(
        &app,
        "/job?id=%22%3E%3Cimg+src%3Dx+onerror%3Dalert%282%29%3E",
    )
    .await;
    assert_eq!(job.status, StatusCode::OK);
    assert!(!job.body.contains("<img src=x") && !job.body.contains("<svg onload"));
    let huge_page = get(&app, "/job?id=huge").await.body;
    assert!(huge_page.len() < 200_000, "{} bytes", huge_page.len());
    assert!(huge_page.contains("2.0 MiB"));
}

#[tokio::test]
async fn each_action_changes_the_backend_as_it_says() {
    let driver = MemoryDriver::new();
    for n in 0..4 {
        let message = Message::builder("work")
            .id(format!("w-{n}"))
            .build()
            .unwrap();
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    }
    let later = Message::builder("work")
        .id("later")
        .delay(Duration::from_secs(3600))
        .build()
        .unwrap();
    driver.send(&later, DEFAULT_PRIORITY).await.unwrap();
    let app = app(&driver);
    let page = get(&app, "/queue").await.body;
    let token = token(&page);
    let form =
        |rest: &str| format!("token={token}&priority=100&back=%2Fqueue%3Fpriority%3D100&{rest}");

    // A forged form changes nothing.
    let forged = post(&app, "/jobs/delete", "token=x&priority=100&id=w-0").await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert_eq!(waiting_ids(&driver).await.len(), 4);

    // Delete a selection of two, and go back to the page.
    let deleted = post(&app, "/jobs/delete", &form("id=w-0&id=w-1")).await;
    assert_eq!(deleted.status, StatusCode::SEE_OTHER);
    assert_eq!(deleted.headers[header::LOCATION], "/queue?priority=100");
    assert_eq!(waiting_ids(&driver).await, ["w-2", "w-3"]);

    // Run a delayed job now: it waits, once.
    for _ in 0..2 {
        post(&app, "/jobs/run-now", &form("id=later")).await;
    }
    let browse = driver.browse().unwrap();
    let found = browse.find(DEFAULT_PRIORITY, "later").await.unwrap();
    assert_eq!(found.map(|(state, _)| state), Some(QueueState::Waiting));
    assert_eq!(waiting_ids(&driver).await.len(), 3, "queued once");

    // Cancel: the backend records it.
    post(&app, "/jobs/cancel", &form("id=w-2")).await;
    let cancelled = driver.controls().unwrap().cancellations(0.0).await.unwrap();
    assert!(
        cancelled
            .iter()
            .any(|c| c.id == "w-2" && c.by == "dashboard")
    );

    // Pause and resume the queue.
    let target = "target=priority%3A100";
    post(&app, "/pause", &form(target)).await;
    let paused = driver.controls().unwrap().paused().await.unwrap();
    assert_eq!(paused, [PauseTarget::Priority(DEFAULT_PRIORITY)]);
    assert!(get(&app, "/queue").await.body.contains("Resume the queue"));
    post(&app, "/resume", &form(target)).await;
    assert!(
        driver
            .controls()
            .unwrap()
            .paused()
            .await
            .unwrap()
            .is_empty()
    );

    // And one type, from the page filtered by it.
    let filtered = get(&app, "/queue?type=work").await.body;
    assert!(filtered.contains("Pause the type work"), "{filtered}");
    post(&app, "/pause", &form("target=type%3Awork")).await;
    let paused = driver.controls().unwrap().paused().await.unwrap();
    assert_eq!(paused, [PauseTarget::Type("work".to_owned())]);
    assert!(
        get(&app, "/queue?type=work")
            .await
            .body
            .contains("Resume the type work")
    );
    post(&app, "/resume", &form("target=type%3Awork")).await;
    assert!(
        driver
            .controls()
            .unwrap()
            .paused()
            .await
            .unwrap()
            .is_empty()
    );

    // Replay a dead job from its state's list.
    let inspect = driver.inspect().unwrap();
    inspect
        .purge(DEFAULT_PRIORITY, QueueState::Waiting)
        .await
        .unwrap();
    bury(&driver, "dead-1").await;
    let dead = get(&app, "/queue?state=dead").await.body;
    assert!(dead.contains("formaction=\"/jobs/replay\""), "{dead}");
    post(&app, "/jobs/replay", &form("id=dead-1")).await;
    assert!(dead_ids(&driver).await.is_empty());
    assert_eq!(waiting_ids(&driver).await, ["dead-1"]);

    // Going back never leaves the dashboard.
    let away = post(
        &app,
        "/jobs/delete",
        &format!("token={token}&priority=100&id=dead-1&back=https%3A%2F%2Felsewhere.example%2F"),
    )
    .await;
    assert_eq!(away.headers[header::LOCATION], "/queues");
    assert_eq!(
        post(&app, "/jobs/delete", &form("")).await.status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn read_only_lists_jobs_without_actions() {
    let driver = MemoryDriver::new();
    driver
        .send(
            &Message::builder("work").id("w").build().unwrap(),
            DEFAULT_PRIORITY,
        )
        .await
        .unwrap();
    let app = Dashboard::new(Arc::new(driver.clone()))
        .read_only(true)
        .router();
    let list = get(&app, "/queue").await.body;
    assert_eq!(rows(&list), 1);
    assert!(!list.contains("<form method=\"post\"") && !list.contains("checkbox"));
    let job = get(&app, "/job?id=w").await.body;
    assert!(!job.contains("formaction"));
    let answer = post(&app, "/jobs/delete", "token=x&id=w").await;
    assert!(answer.status.is_client_error());
    assert_eq!(waiting_ids(&driver).await, ["w"]);
}

#[tokio::test]
async fn jobs_done_are_listed_from_their_records() {
    use hermes_core::tracking::{JobRecord, JobState};
    let driver = MemoryDriver::new();
    let store = driver.jobs().unwrap();
    let keep = Duration::from_secs(600);
    for n in 0..60 {
        let mut record = JobRecord::new(
            format!("done-{n:02}"),
            "mail.send",
            DEFAULT_PRIORITY,
            JobState::Succeeded,
        );
        record.result = Some(json!({ "sent": n }));
        store.put(&record, keep).await.unwrap();
    }
    let mut hostile = JobRecord::new(
        "done-other",
        "<b>other</b>",
        DEFAULT_PRIORITY,
        JobState::Succeeded,
    );
    hostile.result = Some(json!("<script>alert(1)</script>"));
    store.put(&hostile, keep).await.unwrap();
    let mut cancelled = JobRecord::new(
        "stopped",
        "mail.send",
        DEFAULT_PRIORITY,
        JobState::Cancelled,
    );
    cancelled.error = Some("cancelled by ops".into());
    store.put(&cancelled, keep).await.unwrap();
    let elsewhere = JobRecord::new("done-elsewhere", "mail.send", 200, JobState::Succeeded);
    store.put(&elsewhere, keep).await.unwrap();
    let app = app(&driver);

    let queue = get(&app, "/queue").await.body;
    assert!(
        queue.contains("state=succeeded") && queue.contains("state=cancelled"),
        "{queue}"
    );
    let first = get(&app, "/queue?state=succeeded").await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(rows(&first.body), 50, "a page of records");
    assert!(!first.body.contains("stopped") && !first.body.contains("done-elsewhere"));
    let next = href(&first.body, "next").expect("a next page");
    let second = get(&app, &next).await.body;
    assert_eq!(rows(&second), 11, "the rest of the queue's succeeded jobs");
    assert!(href(&second, "next").is_none());

    let other = get(&app, "/queue?state=succeeded&type=%3Cb%3Eother%3C%2Fb%3E")
        .await
        .body;
    assert_eq!(rows(&other), 1, "{other}");
    assert!(other.contains("&lt;script&gt;") && !other.contains("<script>alert"));
    assert!(!other.contains("<b>other</b>"));

    let stopped = get(&app, "/queue?state=cancelled").await.body;
    assert_eq!(rows(&stopped), 1);
    assert!(stopped.contains("cancelled by ops"));
    let job = get(&app, "/job?id=stopped").await;
    assert_eq!(
        job.status,
        StatusCode::OK,
        "a job done opens from its record"
    );
}
