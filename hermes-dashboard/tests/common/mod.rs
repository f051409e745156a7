//! Requests to a dashboard router in the test's process, and what they need of the driver.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use hermes_core::inspect::{DeadKind, DeadReason};
use hermes_core::workers::WorkerInfo;
use hermes_core::{DEFAULT_PRIORITY, Driver, Message};
use hermes_testkit::MemoryDriver;
use tower::ServiceExt;

pub struct Answer {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub body: String,
}

pub async fn send(app: &Router, request: Request<Body>) -> Answer {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    Answer {
        status,
        headers,
        body: String::from_utf8(bytes.to_vec()).unwrap(),
    }
}

pub async fn get(app: &Router, path: &str) -> Answer {
    send(app, Request::get(path).body(Body::empty()).unwrap()).await
}

pub async fn post(app: &Router, path: &str, form: &str) -> Answer {
    let request = Request::post(path)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(form.to_owned()))
        .unwrap();
    send(app, request).await
}

/// A dead letter `id` on the default queue.
pub async fn bury(driver: &MemoryDriver, id: &str) {
    let message = Message::builder("charge").id(id).build().unwrap();
    driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    let delivery = driver
        .receive(&[], Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    let reason = DeadReason::new(DeadKind::Failed, "declined").with_handler("Billing");
    driver
        .dead_letters()
        .unwrap()
        .add(&delivery, &reason)
        .await
        .unwrap();
}

pub async fn dead_ids(driver: &MemoryDriver) -> Vec<String> {
    let letters = driver
        .dead_letters()
        .unwrap()
        .list(DEFAULT_PRIORITY, 100)
        .await
        .unwrap();
    letters.into_iter().map(|l| l.id).collect()
}

/// The token in the first form of `page`.
pub fn token(page: &str) -> String {
    let at = page
        .find("name=\"token\" value=\"")
        .expect("a form with a token")
        + 20;
    page[at..at + 32].to_owned()
}

/// A worker announcing the entry `nightly-export` with a payload.
pub async fn announce_entry(driver: &MemoryDriver) {
    let mut worker = WorkerInfo::new(1, &[], Duration::from_secs(60));
    worker.schedules = vec![
        serde_json::from_value(serde_json::json!({
            "name": "nightly-export", "expression": "0 3 * * *", "zone": "UTC",
            "type": "report.export", "priority": 100, "next": 1_798_131_600.0, "previous": null,
            "payload": { "report": "sales" }
        }))
        .unwrap(),
    ];
    driver
        .workers()
        .unwrap()
        .announce(&worker, Duration::from_secs(60))
        .await
        .unwrap();
}
