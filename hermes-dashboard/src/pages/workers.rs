//! `workers`: the live workers and what they run, or each queue's consumers on a backend that
//! lists no workers.

use std::sync::Arc;

use axum::extract::State as Shared;
use axum::response::{Html, IntoResponse, Response};

use crate::base::Base;
use crate::html::{Cell, escape, live_page as live_frame, page as frame, table};
use crate::state::State;
use crate::view::{running, unix_rfc3339};

/// `workers`: the live workers page.
pub(crate) async fn page(Shared(state): Shared<Arc<State>>, base: Base) -> Response {
    let Some(listed) = state.driver.workers() else {
        return consumers(&state, &base).await;
    };
    let workers = match state.call(&base, listed.list()).await {
        Ok(workers) => workers,
        Err(failed) => return failed,
    };
    let rows: Vec<Vec<Cell>> = workers
        .iter()
        .map(|w| {
            let now: Vec<String> = w.running.iter().map(running).collect();
            vec![
                Cell::Text(w.id.clone()),
                Cell::Text(w.host.clone()),
                Cell::Text(w.pid.to_string()),
                Cell::Text(unix_rfc3339(w.started)),
                Cell::Text(format!("{}/{}", w.busy, w.concurrency)),
                Cell::Text(w.handled.to_string()),
                Cell::Text(w.failed.to_string()),
                Cell::Text(w.version.clone()),
                Cell::Text(now.join(", ")),
            ]
        })
        .collect();
    let body = table(
        &[
            "worker", "host", "pid", "started", "busy", "handled", "failed", "version", "running",
        ],
        &rows,
    );
    Html(live_frame(&base, "Workers", &body)).into_response()
}

/// The workers page of a backend that lists no workers: each queue's consumers, where the
/// broker counts them.
async fn consumers(state: &State, base: &Base) -> Response {
    let stats = match super::stats(state, base).await {
        Ok(stats) => stats,
        Err(failed) => return failed,
    };
    let rows: Vec<Vec<Cell>> = stats
        .iter()
        .map(|q| {
            vec![
                Cell::Text(q.name.clone()),
                Cell::Text(q.priority.to_string()),
                Cell::Text(q.consumers.to_string()),
            ]
        })
        .collect();
    let body = format!(
        "<p>{} lists no workers; the broker counts each queue's consumers.</p>{}",
        escape(state.driver.name()),
        table(&["queue", "priority", "consumers"], &rows)
    );
    Html(frame(base, "Workers", &body)).into_response()
}
