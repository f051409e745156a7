//! `cron`: the cron entries the live workers' schedulers announce, with their last and next
//! ticks, and `POST cron/run`, which emits an entry's message now.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State as Shared;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use crate::base::Base;
use crate::html::{Cell, escape, live_page, table};
use crate::posted::Posted;
use crate::state::State;
use crate::view::{cron_entries, unix_rfc3339};

/// The button emitting entry `name`'s message now.
fn run_now(state: &State, base: &Base, name: &str) -> String {
    format!(
        "<form method=\"post\" action=\"{}\"><input type=\"hidden\" name=\"token\" \
         value=\"{}\"><input type=\"hidden\" name=\"name\" value=\"{}\">\
         <button type=\"submit\" class=\"run-now\">Run now</button></form>",
        escape(&base.to("/cron/run")),
        state.token,
        escape(name)
    )
}

/// `cron`: the page.
pub(crate) async fn page(Shared(state): Shared<Arc<State>>, base: Base) -> Response {
    let Some(listed) = state.driver.workers() else {
        let body = format!(
            "<p>{} lists no workers, whose schedulers announce their entries.</p>",
            escape(state.driver.name())
        );
        return Html(live_page(&base, "Cron", &body)).into_response();
    };
    let workers = match state.call(&base, listed.list()).await {
        Ok(workers) => workers,
        Err(failed) => return failed,
    };
    let entries = cron_entries(&workers);
    if entries.is_empty() {
        let body = "<p class=\"empty\">No running worker announces a schedule.</p>";
        return Html(live_page(&base, "Cron", body)).into_response();
    }
    let at = |t: Option<f64>| t.map_or_else(|| "-".to_owned(), unix_rfc3339);
    let rows: Vec<Vec<Cell>> = entries
        .iter()
        .map(|e| {
            let mut row = vec![
                Cell::Text(e.entry.name.clone()),
                Cell::Html(format!("<code>{}</code>", escape(&e.entry.expression))),
                Cell::Text(e.entry.zone.clone()),
                Cell::Text(e.entry.message_type.clone()),
                Cell::Text(e.entry.priority.to_string()),
                Cell::Text(at(e.previous)),
                Cell::Text(at(e.next)),
                Cell::Text(e.workers.to_string()),
            ];
            if !state.read_only {
                row.push(Cell::Html(run_now(&state, &base, &e.entry.name)));
            }
            row
        })
        .collect();
    let mut header = vec![
        "entry",
        "schedule",
        "zone",
        "type",
        "priority",
        "last tick",
        "next tick",
        "workers",
    ];
    if !state.read_only {
        header.push("");
    }
    let body = table(&header, &rows);
    Html(live_page(&base, "Cron", &body)).into_response()
}

/// `POST cron/run`: emits the message of the entry `name` now, as its next tick would, under
/// an id of its own; the entry's schedule is left as it is.
pub(crate) async fn run(Shared(state): Shared<Arc<State>>, base: Base, body: Bytes) -> Response {
    let posted = match Posted::checked(&state, &body) {
        Ok(posted) => posted,
        Err(refused) => return refused.into_response(),
    };
    let Some(name) = posted.one("name").map(str::to_owned) else {
        return (StatusCode::BAD_REQUEST, "name: the entry to run").into_response();
    };
    let done = state
        .call(&base, async {
            let workers = match state.driver.workers() {
                Some(workers) => workers.list().await?,
                None => Vec::new(),
            };
            let entries = cron_entries(&workers);
            let Some(found) = entries.iter().find(|e| e.entry.name == name) else {
                return Ok(false);
            };
            let message = found.entry.message_now()?;
            state.driver.send(&message, found.entry.priority).await?;
            Ok(true)
        })
        .await;
    match done {
        Ok(true) => posted.back(&base, "/cron"),
        Ok(false) => (
            StatusCode::NOT_FOUND,
            "no running worker announces an entry of that name",
        )
            .into_response(),
        Err(failed) => failed,
    }
}
