//! `job`: one job, found by id: its fields, its payload, what the backend keeps of its runs
//! (state, worker, error, result, progress), and its actions.

use std::sync::Arc;

use axum::extract::{Query, State as Shared};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use hermes_core::tracking::JobRecord;
use hermes_core::{DEFAULT_PRIORITY, Priority};
use serde::Deserialize;

use crate::base::Base;
use crate::html::{Cell, escape, live_page as live_frame, page as frame, table};
use crate::pages::queue::{actions_for, buttons, hidden, job_link, link};
use crate::state::State;
use crate::view::{cut, message_json, size, unix_rfc3339};

/// How many characters of a payload the job's page shows.
pub(crate) const PAYLOAD_CHARS: usize = 64 * 1024;

/// Which job `job` shows.
#[derive(Deserialize)]
pub(crate) struct JobQuery {
    #[serde(default = "default_priority")]
    priority: Priority,
    id: String,
}

fn default_priority() -> Priority {
    DEFAULT_PRIORITY
}

fn field(name: &str, value: impl Into<String>) -> Vec<Cell> {
    vec![Cell::Text(name.to_owned()), Cell::Text(value.into())]
}

/// `job`: the page.
pub(crate) async fn page(
    Shared(state): Shared<Arc<State>>,
    base: Base,
    Query(query): Query<JobQuery>,
) -> Response {
    let found = match state
        .call(&base, async {
            state.browse()?.find(query.priority, &query.id).await
        })
        .await
    {
        Ok(found) => found,
        Err(failed) => return failed,
    };
    let record = match state.driver.jobs() {
        Some(jobs) => match state.call(&base, jobs.get(&query.id)).await {
            Ok(record) => record,
            Err(failed) => return failed,
        },
        None => None,
    };
    if found.is_none() && record.is_none() {
        return (
            StatusCode::NOT_FOUND,
            Html(frame(
                &base,
                "Job",
                &format!("<p>No job {} on this queue.</p>", escape(&query.id)),
            )),
        )
            .into_response();
    }
    let mut body = String::new();
    if let Some((queue_state, message)) = &found {
        let here = job_link(&base, query.priority, message.id());
        let rows = vec![
            field("id", message.id()),
            field("type", message.message_type()),
            vec![
                Cell::Text("state".to_owned()),
                Cell::Html(format!(
                    "<a href=\"{}\">{queue_state}</a>",
                    escape(&link(&base, query.priority, *queue_state, None, None))
                )),
            ],
            field("priority", query.priority.to_string()),
            field("created", unix_rfc3339(message.created())),
            field("due", unix_rfc3339(message.due())),
            field("retries", message.retries().to_string()),
        ];
        body.push_str(&table(&["", ""], &rows));
        let shown =
            serde_json::to_string_pretty(&message_json(message)["payload"]).unwrap_or_default();
        body.push_str(&format!(
            "<h2>Payload <span class=\"note\">({})</span></h2><pre class=\"payload\">{}</pre>",
            size(shown.len()),
            escape(&cut(&shown, PAYLOAD_CHARS))
        ));
        let actions = actions_for(*queue_state);
        if !state.read_only && !actions.is_empty() {
            body.push_str(&format!(
                "<form method=\"post\" class=\"selection\" action=\"{}\">{}\
                 <input type=\"hidden\" name=\"id\" value=\"{}\"><p>{}</p></form>\
                 <script src=\"{}\"></script>",
                escape(&base.to("/jobs/delete")),
                hidden(&state, query.priority, &here),
                escape(message.id()),
                buttons(&base, actions),
                escape(&base.to("/assets/actions.js")),
            ));
        }
    } else {
        body.push_str("<p>The job is no longer on the queue; the backend keeps its record.</p>");
    }
    if let Some(record) = &record {
        body.push_str(&history(record));
    }
    Html(live_frame(&base, &format!("Job {}", query.id), &body)).into_response()
}

/// What the backend keeps of the job's runs.
fn history(record: &JobRecord) -> String {
    let at = |t: Option<f64>| t.map_or_else(|| "-".to_owned(), unix_rfc3339);
    let mut rows = vec![
        field("status", record.state.to_string()),
        field("updated", unix_rfc3339(record.updated)),
        field("retries", record.retries.to_string()),
        field(
            "worker",
            record.worker.clone().unwrap_or_else(|| "-".to_owned()),
        ),
        field("started", at(record.started)),
        field("finished", at(record.finished)),
        field("next attempt", at(record.next_attempt)),
        field(
            "error",
            record.error.clone().unwrap_or_else(|| "-".to_owned()),
        ),
    ];
    if let Some(progress) = &record.progress {
        let note = progress.note.as_deref().unwrap_or("");
        rows.push(field(
            "progress",
            format!(
                "{}% {note} ({})",
                progress.percent,
                unix_rfc3339(progress.at)
            ),
        ));
    }
    if let Some(group) = &record.group {
        rows.push(field("batch or workflow", group.clone()));
    }
    let mut html = format!("<h2>Runs</h2>{}", table(&["", ""], &rows));
    if let Some(result) = &record.result {
        let shown = serde_json::to_string_pretty(result).unwrap_or_default();
        html.push_str(&format!(
            "<h2>Result <span class=\"note\">({})</span></h2><pre class=\"result\">{}</pre>",
            size(shown.len()),
            escape(&cut(&shown, PAYLOAD_CHARS))
        ));
    }
    html
}
