//! How long a queue's first page of jobs takes to render with 100,000 waiting jobs, on the
//! filesystem, Redis and PostgreSQL: the whole request through the dashboard's router (the
//! figures of every queue, the page read from the backend, the HTML), beside the backend's own
//! `Browse::page` call for the same page, measured in the same run.
//!
//! `cargo bench -p hermes-dashboard --bench first_page`; `HERMES_BENCH_JOBS` sets the number of
//! jobs, `HERMES_BENCH_BACKENDS` a list of `fs`, `redis`, `postgres`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use hermes_core::inspect::{PageRequest, QueueState};
use hermes_core::{DEFAULT_PRIORITY, Driver, Message};
use tower::ServiceExt;

const RUNS: usize = 7;

fn jobs() -> usize {
    std::env::var("HERMES_BENCH_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

async fn fill(driver: &dyn Driver, jobs: usize) {
    let started = Instant::now();
    let mut sent = 0;
    while sent < jobs {
        let batch: Vec<Message> = (sent..(sent + 1000).min(jobs))
            .map(|n| {
                Message::builder("report.export")
                    .payload(&serde_json::json!({ "row": n, "file": "customers.csv" }))
                    .build()
                    .unwrap()
            })
            .collect();
        driver.send_batch(&batch, DEFAULT_PRIORITY).await.unwrap();
        sent += batch.len();
    }
    eprintln!(
        "  {jobs} jobs queued in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

async fn measure(name: &str, url: &str, jobs: usize) {
    eprintln!("{name}:");
    let driver: Arc<dyn Driver> = Arc::new(hermes::connect(url).await.expect("the backend"));
    fill(&*driver, jobs).await;
    let app = hermes_dashboard::router(driver.clone());
    let mut whole = Vec::new();
    let mut shown = 0;
    for _ in 0..RUNS {
        let request = Request::get("/queue?priority=100")
            .body(Body::empty())
            .unwrap();
        let started = Instant::now();
        let response = app.clone().oneshot(request).await.unwrap();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        whole.push(started.elapsed());
        shown = String::from_utf8_lossy(&body)
            .matches("class=\"job\"")
            .count();
    }
    let browse = driver.browse().expect("browsing");
    let mut raw = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let page = browse
            .page(DEFAULT_PRIORITY, &PageRequest::new(QueueState::Waiting, 50))
            .await
            .unwrap();
        raw.push(started.elapsed());
        assert_eq!(page.messages.len(), 50);
    }
    assert_eq!(shown, 50, "the first page lists 50 jobs");
    let (whole, raw) = (median(whole), median(raw));
    println!(
        "{name:<9} {jobs} waiting: first page {} (median of {RUNS}); the backend's page call {}; \
         page / call {:.1}x; {}",
        ms(whole),
        ms(raw),
        whole.as_secs_f64() / raw.as_secs_f64(),
        if whole < Duration::from_millis(300) {
            "under 300 ms"
        } else {
            "OVER 300 ms"
        }
    );
    driver
        .inspect()
        .unwrap()
        .purge(DEFAULT_PRIORITY, QueueState::Waiting)
        .await
        .unwrap();
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let jobs = jobs();
    let backends =
        std::env::var("HERMES_BENCH_BACKENDS").unwrap_or_else(|_| "fs redis postgres".to_owned());
    let id = format!("{:08x}", rand::random::<u32>());
    runtime.block_on(async {
        for backend in backends.split_whitespace() {
            match backend {
                "fs" => {
                    let dir = std::env::temp_dir().join(format!("hermes-bench-page-{id}"));
                    measure("fs", &format!("file://{}?queue=jobs", dir.display()), jobs).await;
                    let _ = std::fs::remove_dir_all(dir);
                }
                "redis" => {
                    let url = format!("redis://127.0.0.1:6379/0?key=bench-page-{id}");
                    measure("redis", &url, jobs).await;
                }
                "postgres" => {
                    let url = format!(
                        "postgres://postgres@127.0.0.1:5432/test?queue=bench-page-{id}\
                         &schema=hermes_bench_dashboard"
                    );
                    measure("postgres", &url, jobs).await;
                }
                other => panic!("no backend {other}: fs, redis, postgres"),
            }
        }
    });
}
