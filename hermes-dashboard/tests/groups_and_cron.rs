//! The batches and cron pages (the in-memory driver): a batch found by id with its progress,
//! escaped; an unknown id is a 404; the cron entries the workers announce.

mod common;

use std::sync::Arc;

use axum::http::StatusCode;
use common::get;
use hermes_core::tracking::Batch;
use hermes_core::{Driver, Emitter, Job};
use hermes_dashboard::Dashboard;
use hermes_testkit::MemoryDriver;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Row {
    n: u32,
}

impl Job for Row {
    const TYPE: &'static str = "import.row";
}

#[tokio::test]
async fn a_batch_shows_its_progress() {
    let driver = MemoryDriver::new();
    let shared: Arc<dyn Driver> = Arc::new(driver.clone());
    let app = Dashboard::new(shared.clone()).router();
    let emitter = Emitter::from_arc(shared);
    let open = emitter
        .open_batch(Batch::new().description("<b>customers</b> import"))
        .await
        .unwrap();
    let rows: Vec<Row> = (0..3).map(|n| Row { n }).collect();
    open.add(&rows).await.unwrap();
    open.close().await.unwrap();

    let form = get(&app, "/groups").await;
    assert_eq!(form.status, StatusCode::OK);
    assert!(form.body.contains("name=\"id\""));
    let page = get(&app, &format!("/groups?id={}", open.id())).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("0 of 3 finished"), "{}", page.body);
    assert!(page.body.contains("&lt;b&gt;customers&lt;/b&gt; import"));
    assert!(!page.body.contains("<b>customers"));
    let missing = get(&app, "/groups?id=no-such-batch").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_cron_page_lists_what_the_schedulers_announce() {
    let driver = MemoryDriver::new();
    let app = Dashboard::new(Arc::new(driver.clone())).router();
    assert!(
        get(&app, "/cron")
            .await
            .body
            .contains("No running worker announces")
    );
    common::announce_entry(&driver).await;
    let page = get(&app, "/cron").await.body;
    for shown in [
        "nightly-export",
        "0 3 * * *",
        "report.export",
        "2026-12-24T17:00:00Z",
    ] {
        assert!(page.contains(shown), "{shown}: {page}");
    }
}
