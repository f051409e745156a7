//! `hermes dashboard`: a small web server showing the queue's figures, dead letters and workers,
//! with Prometheus text at `/metrics` and JSON at `/api/stats`. Server-rendered HTML, nothing to
//! build; every page is computed from the driver on each request.
//!
//! It listens on loopback unless told otherwise. Each action (replay, delete) is a POST that
//! must carry the token the server put in its own pages, so a form on another site cannot
//! replay a queue; `--read-only` serves no action at all.

mod html;
mod pages;
mod prometheus;
mod sampler;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use hermes_core::Driver;

use crate::Failure;

/// What every request handler shares.
pub(crate) struct State {
    pub(crate) driver: Arc<dyn Driver>,
    /// The token a POST must carry.
    pub(crate) token: String,
    pub(crate) read_only: bool,
    /// How long one call to the backend may take.
    pub(crate) timeout: Duration,
    /// The workers' counts and throughput since the dashboard started.
    pub(crate) sampler: sampler::Sampler,
}

/// Serves the dashboard on `listen` until interrupted (SIGINT or SIGTERM), printing the address
/// it listens on first.
pub(crate) async fn serve(
    driver: Arc<dyn Driver>,
    listen: SocketAddr,
    read_only: bool,
    timeout: Duration,
) -> Result<(), Failure> {
    let state = Arc::new(State {
        driver,
        token: format!("{:032x}", rand::random::<u128>()),
        read_only,
        timeout,
        sampler: sampler::Sampler::new(hermes_core::time::unix_now()),
    });
    let mut app = Router::new()
        .route("/", get(pages::overview))
        .route("/queues", get(pages::queues))
        .route("/dead", get(pages::dead))
        .route("/workers", get(pages::workers))
        .route("/metrics", get(prometheus::metrics))
        .route("/dead/show", get(pages::dead_letter))
        .route("/api/stats", get(pages::api_stats))
        .route("/api/overview", get(pages::api_overview))
        .route("/assets/overview.js", get(pages::overview_script));
    if !read_only {
        app = app
            .route("/dead/replay", post(pages::replay))
            .route("/dead/delete", post(pages::delete));
    }
    let app = app.with_state(state.clone());
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Failure::failed(format!("cannot listen on {listen}: {e}")))?;
    let address = listener
        .local_addr()
        .map_err(|e| Failure::failed(e.to_string()))?;
    println!("hermes dashboard on http://{address}/");
    tokio::spawn(sampler::keep_sampling(state));
    let stop = hermes_core::SignalShutdown::install()?;
    let stopped = hermes_core::Shutdown::token(&stop).unwrap_or_default();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { stopped.cancelled().await })
        .await
        .map_err(|e| Failure::failed(format!("the dashboard stopped: {e}")))
}
