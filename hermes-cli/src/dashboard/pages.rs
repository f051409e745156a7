//! The pages and the actions.

use std::future::Future;
use std::sync::Arc;

use axum::Form;
use axum::extract::State as Shared;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use hermes_core::{DEFAULT_PRIORITY, Error, Figure, Priority, QueueStats, Replay};
use serde::Deserialize;
use serde_json::json;

use super::State;
use super::html::{Cell, escape, page, table};
use crate::stats::{latency, to_json};

/// Runs a backend call within the dashboard's timeout; an error is a page saying so.
async fn call<T>(
    state: &State,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Response> {
    match tokio::time::timeout(state.timeout, work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(failure(&e.to_string())),
        Err(_) => Err(failure("the backend did not answer in time")),
    }
}

fn failure(text: &str) -> Response {
    (
        StatusCode::BAD_GATEWAY,
        Html(page("Error", &format!("<p>{}</p>", escape(text)))),
    )
        .into_response()
}

fn sum(stats: &[QueueStats], figure: impl Fn(&QueueStats) -> Figure<u64>) -> String {
    let mut total = 0;
    let mut approximate = false;
    for queue in stats {
        match figure(queue) {
            Figure::Exact(n) => total += n,
            Figure::Approximate(n) => {
                total += n;
                approximate = true;
            }
            Figure::Unknown => return "?".to_owned(),
        }
    }
    if approximate {
        format!("~{total}")
    } else {
        total.to_string()
    }
}

/// `/`: the totals of every queue, refreshed by the page every few seconds.
pub(crate) async fn overview(Shared(state): Shared<Arc<State>>) -> Response {
    let stats = match call(&state, state.driver.stats()).await {
        Ok(stats) => stats,
        Err(page) => return page,
    };
    let mut cards = String::from("<div class=\"cards\">");
    for (name, figure) in [
        ("Waiting", sum(&stats, |q| q.waiting)),
        ("Delayed", sum(&stats, |q| q.delayed)),
        ("In flight", sum(&stats, |q| q.in_flight)),
        ("Dead", sum(&stats, |q| q.dead)),
    ] {
        let id = name.to_lowercase().replace(' ', "-");
        cards.push_str(&format!(
            "<div class=\"card\"><b id=\"{id}\">{}</b>{name}</div>",
            escape(&figure)
        ));
    }
    cards.push_str("</div>");
    let script = "<script>setTimeout(function(){location.reload()},5000)</script>";
    Html(page(
        &format!("Overview ({})", state.driver.name()),
        &format!("{cards}{}{script}", queue_table(&stats)),
    ))
    .into_response()
}

fn queue_table(stats: &[QueueStats]) -> String {
    let rows: Vec<Vec<Cell>> = stats
        .iter()
        .map(|q| {
            vec![
                Cell::Text(q.name.clone()),
                Cell::Text(q.priority.to_string()),
                Cell::Text(q.waiting.to_string()),
                Cell::Text(q.delayed.to_string()),
                Cell::Text(q.in_flight.to_string()),
                Cell::Text(q.dead.to_string()),
                Cell::Text(latency(q.latency)),
            ]
        })
        .collect();
    table(
        &[
            "queue",
            "priority",
            "waiting",
            "delayed",
            "in flight",
            "dead",
            "latency",
        ],
        &rows,
    )
}

/// `/queues`: the stats table.
pub(crate) async fn queues(Shared(state): Shared<Arc<State>>) -> Response {
    match call(&state, state.driver.stats()).await {
        Ok(stats) => Html(page("Queues", &queue_table(&stats))).into_response(),
        Err(page) => page,
    }
}

/// `/api/stats`: the figures as JSON, as `hermes stats --json` prints them.
pub(crate) async fn api_stats(Shared(state): Shared<Arc<State>>) -> Response {
    match call(&state, state.driver.stats()).await {
        Ok(stats) => {
            let queues: Vec<_> = stats.iter().map(to_json).collect();
            axum::Json(json!({ "driver": state.driver.name(), "queues": queues })).into_response()
        }
        Err(page) => page,
    }
}

/// A form posting `action` for the dead letter `id` (every one when `None`) of `priority`.
fn action(
    state: &State,
    action: &str,
    label: &str,
    priority: Priority,
    id: Option<&str>,
) -> String {
    let id = id.map_or_else(String::new, |id| {
        format!(
            "<input type=\"hidden\" name=\"id\" value=\"{}\">",
            escape(id)
        )
    });
    format!(
        "<form method=\"post\" action=\"/dead/{action}\"><input type=\"hidden\" name=\"token\" \
         value=\"{}\"><input type=\"hidden\" name=\"priority\" value=\"{priority}\">{id}\
         <button type=\"submit\" class=\"{action}\">{label}</button></form>",
        state.token
    )
}

/// `/dead`: every queue's dead letters with their reasons, and (unless read-only) replay and
/// delete buttons.
pub(crate) async fn dead(Shared(state): Shared<Arc<State>>) -> Response {
    let stats = match call(&state, state.driver.stats()).await {
        Ok(stats) => stats,
        Err(page) => return page,
    };
    let mut body = String::new();
    for queue in &stats {
        let letters = match call(&state, state.driver.dead_letters(queue.priority, 100)).await {
            Ok(letters) => letters,
            Err(page) => return page,
        };
        body.push_str(&format!(
            "<h2>{} (priority {})</h2>",
            escape(&queue.name),
            queue.priority
        ));
        if letters.is_empty() {
            body.push_str("<p>No dead letters.</p>");
            continue;
        }
        if !state.read_only {
            body.push_str(&action(
                &state,
                "replay",
                "Replay all",
                queue.priority,
                None,
            ));
        }
        let rows: Vec<Vec<Cell>> = letters
            .iter()
            .map(|l| {
                let mut row = vec![
                    Cell::Text(l.id.clone()),
                    Cell::Text(
                        l.message
                            .as_ref()
                            .map_or_else(|| "-".to_owned(), |m| m.message_type().to_owned()),
                    ),
                    Cell::Text(l.reason.kind.to_string()),
                    Cell::Text(l.reason.handler.clone().unwrap_or_else(|| "-".to_owned())),
                    Cell::Text(l.reason.retries.to_string()),
                    Cell::Text(l.reason.error.clone()),
                ];
                if !state.read_only {
                    row.push(Cell::Html(format!(
                        "{}{}",
                        action(&state, "replay", "Replay", queue.priority, Some(&l.id)),
                        action(&state, "delete", "Delete", queue.priority, Some(&l.id))
                    )));
                }
                row
            })
            .collect();
        let mut header = vec!["id", "type", "kind", "handler", "retries", "error"];
        if !state.read_only {
            header.push("");
        }
        body.push_str(&table(&header, &rows));
    }
    Html(page("Dead letters", &body)).into_response()
}

/// `/workers`: the live workers and what they run.
pub(crate) async fn workers(Shared(state): Shared<Arc<State>>) -> Response {
    let workers = match call(&state, state.driver.workers()).await {
        Ok(workers) => workers,
        Err(page) => return page,
    };
    let rows: Vec<Vec<Cell>> = workers
        .iter()
        .map(|w| {
            let running: Vec<String> = w
                .running
                .iter()
                .map(|r| format!("{} ({})", r.id, r.message_type))
                .collect();
            vec![
                Cell::Text(w.id.clone()),
                Cell::Text(w.host.clone()),
                Cell::Text(w.pid.to_string()),
                Cell::Text(crate::args::format_rfc3339(hermes_core::time::from_unix(
                    w.started,
                ))),
                Cell::Text(format!("{}/{}", w.busy, w.concurrency)),
                Cell::Text(w.version.clone()),
                Cell::Text(running.join(", ")),
            ]
        })
        .collect();
    let body = table(
        &[
            "worker", "host", "pid", "started", "busy", "version", "running",
        ],
        &rows,
    );
    Html(page("Workers", &body)).into_response()
}

/// What an action posts.
#[derive(Deserialize)]
pub(crate) struct ActionForm {
    token: String,
    #[serde(default = "default_priority")]
    priority: Priority,
    id: Option<String>,
}

fn default_priority() -> Priority {
    DEFAULT_PRIORITY
}

/// Whether a post carries the token of this server's pages.
fn carries_token(state: &State, form: &ActionForm) -> bool {
    form.token == state.token
}

fn refused() -> Response {
    (
        StatusCode::FORBIDDEN,
        "the form's token is not this dashboard's",
    )
        .into_response()
}

/// `POST /dead/replay`: replays one dead letter (`id`) or all of a queue's.
pub(crate) async fn replay(
    Shared(state): Shared<Arc<State>>,
    Form(form): Form<ActionForm>,
) -> Response {
    if !carries_token(&state, &form) {
        return refused();
    }
    let replay = form
        .id
        .as_ref()
        .map_or_else(Replay::all, |id| Replay::ids([id.clone()]));
    match call(&state, state.driver.replay(form.priority, &replay)).await {
        Ok(_) => Redirect::to("/dead").into_response(),
        Err(page) => page,
    }
}

/// `POST /dead/delete`: removes one dead letter.
pub(crate) async fn delete(
    Shared(state): Shared<Arc<State>>,
    Form(form): Form<ActionForm>,
) -> Response {
    if !carries_token(&state, &form) {
        return refused();
    }
    let Some(id) = form.id.as_deref() else {
        return (StatusCode::BAD_REQUEST, "no dead letter named").into_response();
    };
    match call(&state, state.driver.delete(form.priority, id)).await {
        Ok(_) => Redirect::to("/dead").into_response(),
        Err(page) => page,
    }
}
