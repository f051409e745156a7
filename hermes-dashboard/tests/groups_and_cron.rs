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

#[tokio::test]
async fn the_batches_are_listed_the_last_first_a_page_at_a_time() {
    let driver = MemoryDriver::new();
    let shared: Arc<dyn Driver> = Arc::new(driver.clone());
    let app = Dashboard::new(shared.clone()).router();
    let emitter = Emitter::from_arc(shared);
    let mut ids = Vec::new();
    for n in 0..30 {
        let open = emitter
            .open_batch(Batch::new().description(format!("<i>import {n}</i>")))
            .await
            .unwrap();
        open.add(&[Row { n }, Row { n: n + 100 }]).await.unwrap();
        ids.push(open.id().to_owned());
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let first = get(&app, "/groups").await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.body.matches("class=\"group\"").count(), 25);
    let newest = first.body.find(&ids[29]).expect("the last batch listed");
    let older = first.body.find(&ids[20]).expect("an older batch listed");
    assert!(newest < older, "the last created first");
    assert!(first.body.contains("</progress> 0 of "), "{}", first.body);
    assert!(first.body.contains("&lt;i&gt;import 29"));
    assert!(
        !first.body.contains("<i>import"),
        "descriptions are escaped"
    );
    let at = first
        .body
        .find("class=\"next\" href=\"")
        .expect("a next page")
        + 19;
    let next = first.body[at..first.body[at..].find('"').unwrap() + at].replace("&amp;", "&");
    let second = get(&app, &next).await;
    assert_eq!(second.body.matches("class=\"group\"").count(), 5);
    assert!(second.body.contains(&ids[0]) && !second.body.contains(&ids[29]));
}
