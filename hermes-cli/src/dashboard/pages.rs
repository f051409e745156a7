//! The pages and the actions.

use std::future::Future;
use std::sync::Arc;

use axum::Form;
use axum::extract::{Query, State as Shared};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use hermes_core::inspect::{Figure, QueueStats, Replay};
use hermes_core::{DEFAULT_PRIORITY, Error, Priority};
use serde::Deserialize;
use serde_json::json;

use super::State;
use super::html::{Cell, escape, page, table};
use crate::facet;
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

/// The overview's counters, by the id of the element showing each: the queue totals and the
/// messages handled and failed since the dashboard started (`?` where unknown).
fn totals(state: &State, stats: &[QueueStats]) -> Vec<(&'static str, &'static str, String)> {
    let throughput = state.sampler.throughput();
    let count = |n: Option<u64>| n.map_or_else(|| "?".to_owned(), |n| n.to_string());
    vec![
        ("waiting", "Waiting", sum(stats, |q| q.waiting)),
        ("delayed", "Delayed", sum(stats, |q| q.delayed)),
        ("in-flight", "In flight", sum(stats, |q| q.in_flight)),
        ("dead", "Dead", sum(stats, |q| q.dead)),
        ("handled", "Handled", count(throughput.handled)),
        ("failed", "Failed", count(throughput.failed)),
    ]
}

/// `/`: the totals of every queue, the messages handled and failed since the dashboard
/// started, and the throughput chart; the page refreshes them every few seconds.
pub(crate) async fn overview(Shared(state): Shared<Arc<State>>) -> Response {
    let stats = match call(&state, async {
        facet::inspect(&*state.driver)?.stats().await
    })
    .await
    {
        Ok(stats) => stats,
        Err(page) => return page,
    };
    let mut cards = String::from("<div class=\"cards\">");
    for (id, name, figure) in totals(&state, &stats) {
        cards.push_str(&format!(
            "<div class=\"card\"><b id=\"{id}\">{}</b>{name}</div>",
            escape(&figure)
        ));
    }
    cards.push_str("</div>");
    let since = crate::args::format_rfc3339(hermes_core::time::from_unix(
        state.sampler.throughput().since,
    ));
    let chart = format!(
        "<h2>Throughput</h2><p class=\"note\">Handled (blue) and failed (red) messages per \
         second over the last five minutes, from the workers' announcements; handled and failed \
         count since {since}. <span id=\"chart-now\"></span> \
         <span id=\"chart-span\"></span></p><div class=\"chart\">\
         <span id=\"chart-top\"></span><svg id=\"chart\" viewBox=\"0 0 600 160\" \
         preserveAspectRatio=\"none\"></svg></div>"
    );
    Html(page(
        &format!("Overview ({})", state.driver.name()),
        &format!(
            "{cards}{chart}<h2>Queues</h2><div id=\"queues\">{}</div>\
             <script src=\"/assets/overview.js\"></script>",
            queue_table(&stats)
        ),
    ))
    .into_response()
}

/// `/api/overview`: the overview's counters, chart and queue table (as escaped HTML) as JSON,
/// for its script.
pub(crate) async fn api_overview(Shared(state): Shared<Arc<State>>) -> Response {
    let stats = match call(&state, async {
        facet::inspect(&*state.driver)?.stats().await
    })
    .await
    {
        Ok(stats) => stats,
        Err(page) => return page,
    };
    let totals: serde_json::Map<String, serde_json::Value> = totals(&state, &stats)
        .into_iter()
        .map(|(id, _, figure)| (id.to_owned(), figure.into()))
        .collect();
    axum::Json(json!({
        "totals": totals,
        "throughput": state.sampler.throughput(),
        "queues_html": queue_table(&stats),
    }))
    .into_response()
}

/// `/assets/overview.js`: the overview's script, compiled into the binary.
pub(crate) async fn overview_script() -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/javascript; charset=utf-8",
        )],
        include_str!("assets/overview.js"),
    )
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
    match call(&state, async {
        facet::inspect(&*state.driver)?.stats().await
    })
    .await
    {
        Ok(stats) => Html(page("Queues", &queue_table(&stats))).into_response(),
        Err(page) => page,
    }
}

/// `/api/stats`: the figures as JSON, as `hermes stats --json` prints them.
pub(crate) async fn api_stats(Shared(state): Shared<Arc<State>>) -> Response {
    match call(&state, async {
        facet::inspect(&*state.driver)?.stats().await
    })
    .await
    {
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
    let all = if id.is_none() { "-all" } else { "" };
    let id = id.map_or_else(String::new, |id| {
        format!(
            "<input type=\"hidden\" name=\"id\" value=\"{}\">",
            escape(id)
        )
    });
    format!(
        "<form method=\"post\" action=\"/dead/{action}\"><input type=\"hidden\" name=\"token\" \
         value=\"{}\"><input type=\"hidden\" name=\"priority\" value=\"{priority}\">{id}\
         <button type=\"submit\" class=\"{action}{all}\">{label}</button></form>",
        state.token
    )
}

/// `/dead`: every queue's dead letters with their reasons, and (unless read-only) replay and
/// delete buttons.
pub(crate) async fn dead(Shared(state): Shared<Arc<State>>) -> Response {
    let stats = match call(&state, async {
        facet::inspect(&*state.driver)?.stats().await
    })
    .await
    {
        Ok(stats) => stats,
        Err(page) => return page,
    };
    let mut body = String::new();
    for queue in &stats {
        let letters = match call(&state, async {
            facet::dead_letters(&*state.driver)?
                .list(queue.priority, 100)
                .await
        })
        .await
        {
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
                    Cell::Html(format!(
                        "<a class=\"show\" href=\"/dead/show?priority={}&amp;id={}\">{}</a>",
                        queue.priority,
                        escape(&query_value(&l.id)),
                        escape(&l.id)
                    )),
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

/// `text` percent-encoded for a query string.
fn query_value(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// Which dead letter `/dead/show` shows.
#[derive(Deserialize)]
pub(crate) struct LetterQuery {
    #[serde(default = "default_priority")]
    priority: Priority,
    id: String,
}

/// `/dead/show`: one dead letter, its reason and its message, with (unless read-only) replay
/// and delete buttons.
pub(crate) async fn dead_letter(
    Shared(state): Shared<Arc<State>>,
    Query(query): Query<LetterQuery>,
) -> Response {
    let letters = match call(&state, async {
        facet::dead_letters(&*state.driver)?
            .list(query.priority, usize::MAX)
            .await
    })
    .await
    {
        Ok(letters) => letters,
        Err(page) => return page,
    };
    let Some(letter) = letters.iter().find(|l| l.id == query.id) else {
        return (
            StatusCode::NOT_FOUND,
            Html(page(
                "Dead letter",
                &format!("<p>No dead letter {}.</p>", escape(&query.id)),
            )),
        )
            .into_response();
    };
    let reason = &letter.reason;
    let rows = vec![
        vec![Cell::Text("id".into()), Cell::Text(letter.id.clone())],
        vec![
            Cell::Text("priority".into()),
            Cell::Text(letter.priority.to_string()),
        ],
        vec![
            Cell::Text("kind".into()),
            Cell::Text(reason.kind.to_string()),
        ],
        vec![
            Cell::Text("handler".into()),
            Cell::Text(reason.handler.clone().unwrap_or_else(|| "-".to_owned())),
        ],
        vec![
            Cell::Text("at".into()),
            Cell::Text(crate::args::format_rfc3339(hermes_core::time::from_unix(
                reason.at,
            ))),
        ],
        vec![
            Cell::Text("retries".into()),
            Cell::Text(reason.retries.to_string()),
        ],
        vec![Cell::Text("error".into()), Cell::Text(reason.error.clone())],
    ];
    let message = letter.message.as_ref().map_or_else(
        || "<p>The body could not be decoded.</p>".to_owned(),
        |m| {
            format!(
                "<h2>Message</h2><pre>{}</pre>",
                escape(
                    &serde_json::to_string_pretty(&crate::peek::message_json(m))
                        .unwrap_or_default()
                )
            )
        },
    );
    let actions = if state.read_only {
        String::new()
    } else {
        format!(
            "<p>{}{}</p>",
            action(
                &state,
                "replay",
                "Replay",
                letter.priority,
                Some(&letter.id)
            ),
            action(
                &state,
                "delete",
                "Delete",
                letter.priority,
                Some(&letter.id)
            )
        )
    };
    Html(page(
        "Dead letter",
        &format!("{}{message}{actions}", table(&["", ""], &rows)),
    ))
    .into_response()
}

/// `/workers`: the live workers and what they run.
pub(crate) async fn workers(Shared(state): Shared<Arc<State>>) -> Response {
    let Some(listed) = state.driver.workers() else {
        return consumers(&state).await;
    };
    let workers = match call(&state, listed.list()).await {
        Ok(workers) => workers,
        Err(page) => return page,
    };
    let rows: Vec<Vec<Cell>> = workers
        .iter()
        .map(|w| {
            let running: Vec<String> = w
                .running
                .iter()
                .map(crate::workers::running_message)
                .collect();
            vec![
                Cell::Text(w.id.clone()),
                Cell::Text(w.host.clone()),
                Cell::Text(w.pid.to_string()),
                Cell::Text(crate::args::format_rfc3339(hermes_core::time::from_unix(
                    w.started,
                ))),
                Cell::Text(format!("{}/{}", w.busy, w.concurrency)),
                Cell::Text(w.handled.to_string()),
                Cell::Text(w.failed.to_string()),
                Cell::Text(w.version.clone()),
                Cell::Text(running.join(", ")),
            ]
        })
        .collect();
    let body = table(
        &[
            "worker", "host", "pid", "started", "busy", "handled", "failed", "version", "running",
        ],
        &rows,
    );
    Html(page("Workers", &body)).into_response()
}

/// The workers page of a backend that lists no workers: each queue's consumers, where the
/// broker counts them.
async fn consumers(state: &State) -> Response {
    let stats = match call(state, async {
        facet::inspect(&*state.driver)?.stats().await
    })
    .await
    {
        Ok(stats) => stats,
        Err(page) => return page,
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
    match call(&state, async {
        facet::dead_letters(&*state.driver)?
            .replay(form.priority, &replay)
            .await
    })
    .await
    {
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
    match call(&state, async {
        facet::browse(&*state.driver)?
            .delete(form.priority, id)
            .await
    })
    .await
    {
        Ok(_) => Redirect::to("/dead").into_response(),
        Err(page) => page,
    }
}
