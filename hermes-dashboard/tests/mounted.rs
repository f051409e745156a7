//! The dashboard nested in an application: its links, forms, assets and redirects name the
//! path it is mounted under; actions need the page's token; read-only serves none; credentials
//! are asked of every request.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine;
use common::{bury, dead_ids, get, post, send, token};
use hermes_core::Driver;
use hermes_dashboard::{Credentials, Dashboard};
use hermes_testkit::MemoryDriver;

fn nested(dashboard: Dashboard) -> Router {
    Router::new().nest("/ops/hermes", dashboard.router())
}

#[tokio::test]
async fn nested_pages_link_and_redirect_under_their_path() {
    let driver = MemoryDriver::new();
    let app = nested(Dashboard::new(Arc::new(driver.clone())));

    for path in ["/ops/hermes", "/ops/hermes/queues", "/ops/hermes/workers"] {
        let page = get(&app, path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        for link in ["/ops/hermes/", "/ops/hermes/queues", "/ops/hermes/dead"] {
            assert!(page.body.contains(&format!("href=\"{link}\"")), "{path}");
        }
        assert!(page.body.contains("href=\"/ops/hermes/assets/style.css\""));
        assert!(
            !page.body.contains("href=\"/queues\""),
            "{path}: a root link"
        );
    }
    let overview = get(&app, "/ops/hermes").await.body;
    assert!(overview.contains("src=\"/ops/hermes/assets/overview.js\""));
    assert!(overview.contains("data-api=\"/ops/hermes/api/overview\""));

    let style = get(&app, "/ops/hermes/assets/style.css").await;
    assert_eq!(style.status, StatusCode::OK);
    assert!(
        style.headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/css")
    );
    assert!(style.body.contains("prefers-color-scheme: dark"));
    let script = get(&app, "/ops/hermes/assets/overview.js").await;
    assert!(script.body.contains("data-api"));
    let api = get(&app, "/ops/hermes/api/overview").await;
    let api: serde_json::Value = serde_json::from_str(&api.body).unwrap();
    assert_eq!(api["totals"]["waiting"], "0");
    assert!(get(&app, "/queues").await.status == StatusCode::NOT_FOUND);
    let metrics = get(&app, "/ops/hermes/metrics").await;
    assert!(
        metrics.body.contains("hermes_queue_waiting"),
        "{}",
        metrics.body
    );
}

#[tokio::test]
async fn a_replay_needs_the_pages_token_and_returns_under_the_path() {
    let driver = MemoryDriver::new();
    bury(&driver, "dead-1").await;
    let app = nested(Dashboard::new(Arc::new(driver.clone())));

    let page = get(&app, "/ops/hermes/dead").await.body;
    assert!(
        page.contains("action=\"/ops/hermes/dead/replay\""),
        "{page}"
    );
    assert!(page.contains("href=\"/ops/hermes/dead/show?priority=100&amp;id=dead-1\""));
    let shown = get(&app, "/ops/hermes/dead/show?priority=100&id=dead-1").await;
    assert_eq!(shown.status, StatusCode::OK);
    assert!(shown.body.contains("declined"));

    let forged = post(
        &app,
        "/ops/hermes/dead/replay",
        "token=0&priority=100&id=dead-1",
    )
    .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert_eq!(
        dead_ids(&driver).await,
        ["dead-1"],
        "a forged post changes nothing"
    );

    let form = format!("token={}&priority=100&id=dead-1", token(&page));
    let replayed = post(&app, "/ops/hermes/dead/replay", &form).await;
    assert_eq!(replayed.status, StatusCode::SEE_OTHER);
    assert_eq!(replayed.headers[header::LOCATION], "/ops/hermes/dead");
    assert!(dead_ids(&driver).await.is_empty());
    let again = driver
        .receive(&[], Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the replayed message");
    assert_eq!(again.message().id(), "dead-1");
}

#[tokio::test]
async fn read_only_serves_no_action() {
    let driver = MemoryDriver::new();
    bury(&driver, "dead-1").await;
    let app = nested(Dashboard::new(Arc::new(driver.clone())).read_only(true));
    let page = get(&app, "/ops/hermes/dead").await.body;
    assert!(page.contains("dead-1") && !page.contains("<form"), "{page}");
    let answer = post(&app, "/ops/hermes/dead/replay", "token=x&priority=100").await;
    assert!(answer.status.is_client_error(), "{}", answer.status);
    assert_eq!(dead_ids(&driver).await, ["dead-1"]);
}

fn with_authorization(path: &str, value: &str) -> Request<Body> {
    Request::get(path)
        .header(header::AUTHORIZATION, value)
        .body(Body::empty())
        .unwrap()
}

#[tokio::test]
async fn credentials_are_asked_of_every_request_and_never_shown() {
    let secret = "tok-0123456789abcdef";
    let driver = MemoryDriver::new();
    let app = Dashboard::new(Arc::new(driver))
        .credentials(Credentials::token(secret))
        .router();
    for path in [
        "/",
        "/queues",
        "/dead",
        "/metrics",
        "/api/stats",
        "/assets/style.css",
    ] {
        let refused = get(&app, path).await;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{path}");
        assert!(
            refused.headers[header::WWW_AUTHENTICATE]
                .to_str()
                .unwrap()
                .starts_with("Basic ")
        );
        let wrong = send(
            &app,
            with_authorization(path, "Bearer tok-0123456789abcdeF"),
        )
        .await;
        assert_eq!(wrong.status, StatusCode::UNAUTHORIZED, "{path}");
        assert!(!wrong.body.contains(secret) && !wrong.body.contains("abcdeF"));
        let right = send(&app, with_authorization(path, &format!("Bearer {secret}"))).await;
        assert_eq!(right.status, StatusCode::OK, "{path}");
        assert!(!right.body.contains(secret), "{path} shows the token");
    }
    // A browser sends the token as the password of Basic authentication.
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("ops:{secret}"));
    let page = send(&app, with_authorization("/", &format!("Basic {basic}"))).await;
    assert_eq!(page.status, StatusCode::OK);

    let pair = Dashboard::new(Arc::new(MemoryDriver::new()))
        .credentials(Credentials::user_password("ops", "pw"))
        .router();
    let good = base64::engine::general_purpose::STANDARD.encode("ops:pw");
    let bad = base64::engine::general_purpose::STANDARD.encode("ops:pW");
    let ok = send(&pair, with_authorization("/", &format!("Basic {good}"))).await;
    assert_eq!(ok.status, StatusCode::OK);
    let refused = send(&pair, with_authorization("/", &format!("Basic {bad}"))).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
}
