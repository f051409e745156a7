//! `queue`: one queue's jobs in one state, a page at a time from the backend, filtered by type;
//! a search by id; each job's actions for a selection; pausing and resuming the queue. Where
//! the backend keeps job records, the jobs that succeeded or were cancelled too, from those
//! records.

use std::sync::Arc;

use axum::extract::{Query, State as Shared};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use hermes_core::flow::PauseTarget;
use hermes_core::inspect::{PageRequest, QueueState, QueueStats};
use hermes_core::tracking::{JobRecord, JobState, RecordRequest};
use hermes_core::{DEFAULT_PRIORITY, Message, Priority};
use serde::Deserialize;

use crate::base::Base;
use crate::html::{Cell, escape, live_page as live_frame, query_value, table};
use crate::state::{State, failure};
use crate::view::{PREVIEW_CHARS, cut, preview, unix_rfc3339};

/// How many jobs a page lists.
pub(crate) const PAGE_SIZE: usize = 50;

/// What `queue` is asked for.
#[derive(Deserialize)]
pub(crate) struct QueueQuery {
    #[serde(default = "default_priority")]
    priority: Priority,
    #[serde(default)]
    state: Option<String>,
    /// Only jobs of this type; empty for all.
    #[serde(default, rename = "type")]
    message_type: Option<String>,
    /// Where the page starts.
    #[serde(default)]
    cursor: Option<String>,
}

fn default_priority() -> Priority {
    DEFAULT_PRIORITY
}

/// The actions a job in `state` offers: (form action, button label, asks to confirm).
pub(crate) fn actions_for(state: QueueState) -> &'static [(&'static str, &'static str, bool)] {
    match state {
        QueueState::Waiting => &[("cancel", "Cancel", true), ("delete", "Delete", true)],
        QueueState::Delayed => &[
            ("run-now", "Run now", false),
            ("cancel", "Cancel", true),
            ("delete", "Delete", true),
        ],
        QueueState::InFlight => &[("cancel", "Cancel", true)],
        QueueState::Dead => &[("replay", "Replay", false), ("delete", "Delete", true)],
        _ => &[],
    }
}

/// The states of the tabs read from the job records, after the queue's own.
const KEPT_STATES: [JobState; 2] = [JobState::Succeeded, JobState::Cancelled];

/// What a queue page lists: the jobs in one of the queue's states, or the records of jobs
/// done in one of [`KEPT_STATES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    Queue(QueueState),
    Kept(JobState),
}

impl Shown {
    fn parse(text: &str) -> Result<Shown, String> {
        if let Some(kept) = KEPT_STATES.iter().find(|s| s.as_str() == text) {
            return Ok(Shown::Kept(*kept));
        }
        text.parse::<QueueState>()
            .map(Shown::Queue)
            .map_err(|e| e.to_string())
    }
}

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shown::Queue(state) => state.fmt(f),
            Shown::Kept(state) => f.write_str(state.as_str()),
        }
    }
}

/// The link to the queue of `priority` in `state` (a [`QueueState`] or one of
/// [`KEPT_STATES`]), of `message_type`, from `cursor`.
pub(crate) fn link(
    base: &Base,
    priority: Priority,
    state: impl std::fmt::Display,
    message_type: Option<&str>,
    cursor: Option<&str>,
) -> String {
    let mut href = format!("{}?priority={priority}&state={state}", base.to("/queue"));
    if let Some(t) = message_type {
        href.push_str(&format!("&type={}", query_value(t)));
    }
    if let Some(c) = cursor {
        href.push_str(&format!("&cursor={}", query_value(c)));
    }
    href
}

/// The link to the page of job `id` on the queue of `priority`.
pub(crate) fn job_link(base: &Base, priority: Priority, id: &str) -> String {
    format!(
        "{}?priority={priority}&id={}",
        base.to("/job"),
        query_value(id)
    )
}

/// The hidden fields every action form carries: the token, the queue, the page to go back to.
pub(crate) fn hidden(state: &State, priority: Priority, back: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"token\" value=\"{}\">\
         <input type=\"hidden\" name=\"priority\" value=\"{priority}\">\
         <input type=\"hidden\" name=\"back\" value=\"{}\">",
        state.token,
        escape(back)
    )
}

/// Buttons posting each of `actions` to `jobs/<action>` from the form they sit in.
pub(crate) fn buttons(base: &Base, actions: &[(&str, &str, bool)]) -> String {
    actions
        .iter()
        .map(|(action, label, confirm)| {
            format!(
                "<button type=\"submit\" class=\"{action}\" formaction=\"{}\"{}>{label}</button>",
                escape(&base.to(&format!("/jobs/{action}"))),
                if *confirm {
                    format!(" data-confirm=\"{label} the selected jobs?\"")
                } else {
                    String::new()
                }
            )
        })
        .collect()
}

/// `queue`: the page.
pub(crate) async fn page(
    Shared(state): Shared<Arc<State>>,
    base: Base,
    Query(query): Query<QueueQuery>,
) -> Response {
    let shown = match Shown::parse(query.state.as_deref().unwrap_or("waiting")) {
        Ok(shown) => shown,
        Err(e) => return failure(&base, StatusCode::BAD_REQUEST, &e),
    };
    let message_type = query.message_type.as_deref().filter(|t| !t.is_empty());
    let stats = match super::stats(&state, &base).await {
        Ok(stats) => stats,
        Err(failed) => return failed,
    };
    let Some(queue) = stats.iter().find(|q| q.priority == query.priority) else {
        return failure(
            &base,
            StatusCode::NOT_FOUND,
            &format!("no queue of priority {}", query.priority),
        );
    };
    let listed = match shown {
        Shown::Queue(queue_state) => {
            let mut request = PageRequest::new(queue_state, PAGE_SIZE);
            if let Some(t) = message_type {
                request = request.of_type(t);
            }
            if let Some(cursor) = &query.cursor {
                request = request.after(cursor.clone());
            }
            state
                .call(&base, async {
                    state.browse()?.page(query.priority, &request).await
                })
                .await
                .map(|page| (Listed::Messages(page.messages), page.next))
        }
        Shown::Kept(kept) => {
            let mut request = RecordRequest::new(PAGE_SIZE)
                .in_state(kept)
                .of_priority(query.priority);
            if let Some(t) = message_type {
                request = request.of_type(t);
            }
            if let Some(cursor) = &query.cursor {
                request = request.after(cursor.clone());
            }
            state
                .call(&base, async { state.jobs()?.records(&request).await })
                .await
                .map(|page| (Listed::Records(page.records), page.next))
        }
    };
    let (listed, next) = match listed {
        Ok(listed) => listed,
        Err(failed) => return failed,
    };
    let here = link(
        &base,
        query.priority,
        shown,
        message_type,
        query.cursor.as_deref(),
    );
    let mut body = tabs(
        &base,
        queue,
        shown,
        message_type,
        state.driver.jobs().is_some(),
    );
    body.push_str(&paused_controls(&state, &base, query.priority, message_type, &here).await);
    body.push_str(&filters(&base, query.priority, shown, message_type));
    body.push_str(&match (&listed, shown) {
        (Listed::Messages(messages), Shown::Queue(queue_state)) => {
            jobs_table(&state, &base, query.priority, queue_state, messages, &here)
        }
        (Listed::Records(records), _) => records_table(&base, query.priority, records),
        _ => String::new(),
    });
    let mut pager = Vec::new();
    if query.cursor.is_some() {
        pager.push(format!(
            "<a class=\"first\" href=\"{}\">First page</a>",
            escape(&link(&base, query.priority, shown, message_type, None))
        ));
    }
    if let Some(next) = &next {
        pager.push(format!(
            "<a class=\"next\" href=\"{}\">Next page</a>",
            escape(&link(
                &base,
                query.priority,
                shown,
                message_type,
                Some(next)
            ))
        ));
    }
    if !pager.is_empty() {
        body.push_str(&format!("<p class=\"pager\">{}</p>", pager.join(" ")));
    }
    Html(live_frame(&base, &format!("Queue {}", queue.name), &body)).into_response()
}

/// What a page lists.
enum Listed {
    Messages(Vec<Message>),
    Records(Vec<JobRecord>),
}

/// A tab per state, with its count; then, where the backend keeps job records, one per state
/// of [`KEPT_STATES`] (uncounted: records are read a page at a time).
fn tabs(
    base: &Base,
    queue: &QueueStats,
    shown: Shown,
    message_type: Option<&str>,
    kept: bool,
) -> String {
    let mut html = String::from("<p class=\"tabs\">");
    let current = |this: Shown| {
        if this == shown {
            " aria-current=\"page\""
        } else {
            ""
        }
    };
    for state in QueueState::ALL {
        html.push_str(&format!(
            "<a href=\"{}\"{}>{state} <span class=\"count\">{}</span></a>",
            escape(&link(base, queue.priority, state, message_type, None)),
            current(Shown::Queue(state)),
            queue.count(state)
        ));
    }
    if kept {
        for state in KEPT_STATES {
            html.push_str(&format!(
                "<a href=\"{}\"{}>{}</a>",
                escape(&link(
                    base,
                    queue.priority,
                    state.as_str(),
                    message_type,
                    None
                )),
                current(Shown::Kept(state)),
                state.as_str()
            ));
        }
    }
    html.push_str("</p>");
    html
}

/// The records of a page of jobs done: each links to its job's page.
fn records_table(base: &Base, priority: Priority, records: &[JobRecord]) -> String {
    if records.is_empty() {
        return "<p class=\"empty\">No jobs here (records are kept for a while only).</p>"
            .to_owned();
    }
    let rows: Vec<Vec<Cell>> = records
        .iter()
        .map(|r| {
            let outcome = match (&r.result, &r.error) {
                (Some(result), _) => result.to_string(),
                (None, Some(error)) => error.clone(),
                (None, None) => String::new(),
            };
            vec![
                Cell::Html(format!(
                    "<a class=\"job\" href=\"{}\">{}</a>",
                    escape(&job_link(base, priority, &r.id)),
                    escape(&r.id)
                )),
                Cell::Text(r.message_type.clone()),
                Cell::Text(unix_rfc3339(r.finished.unwrap_or(r.updated))),
                Cell::Text(r.retries.to_string()),
                Cell::Text(r.worker.clone().unwrap_or_default()),
                Cell::Html(format!(
                    "<code>{}</code>",
                    escape(&cut(&outcome, PREVIEW_CHARS))
                )),
            ]
        })
        .collect();
    table(
        &[
            "id",
            "type",
            "finished",
            "retries",
            "worker",
            "result or reason",
        ],
        &rows,
    )
}

/// The pause or resume buttons of the queue and, when the page shows one type, of that type,
/// where the backend has controls.
async fn paused_controls(
    state: &State,
    base: &Base,
    priority: Priority,
    message_type: Option<&str>,
    here: &str,
) -> String {
    let Some(controls) = state.driver.controls() else {
        return String::new();
    };
    let Ok(Ok(paused)) = tokio::time::timeout(state.timeout, controls.paused()).await else {
        return String::new();
    };
    let mut targets = vec![(PauseTarget::Priority(priority), "the queue".to_owned())];
    if let Some(t) = message_type {
        targets.push((PauseTarget::Type(t.to_owned()), format!("the type {t}")));
    }
    let mut html = String::new();
    for (target, named) in targets {
        let is_paused = paused.contains(&target);
        let note = if is_paused {
            format!(
                "<strong class=\"paused\">Paused:</strong> no worker starts a job of {}. ",
                escape(&named)
            )
        } else {
            String::new()
        };
        if state.read_only {
            if is_paused {
                html.push_str(&format!("<p>{note}</p>"));
            }
            continue;
        }
        let (action, verb) = if is_paused {
            ("resume", "Resume")
        } else {
            ("pause", "Pause")
        };
        html.push_str(&format!(
            "<form method=\"post\" action=\"{}\"><p>{note}{}\
             <input type=\"hidden\" name=\"target\" value=\"{}\">\
             <button type=\"submit\" class=\"{action}\">{verb} {}</button></p></form>",
            escape(&base.to(&format!("/{action}"))),
            hidden(state, priority, here),
            escape(&target.to_string()),
            escape(&named),
        ));
    }
    html
}

/// The type filter and the search by id.
fn filters(base: &Base, priority: Priority, shown: Shown, message_type: Option<&str>) -> String {
    format!(
        "<div class=\"filters\"><form method=\"get\" action=\"{queue}\">\
         <input type=\"hidden\" name=\"priority\" value=\"{priority}\">\
         <input type=\"hidden\" name=\"state\" value=\"{shown}\">\
         <label>Type <input name=\"type\" value=\"{}\" placeholder=\"every type\"></label> \
         <button type=\"submit\">Filter</button></form> \
         <form method=\"get\" action=\"{job}\">\
         <input type=\"hidden\" name=\"priority\" value=\"{priority}\">\
         <label>Job id <input name=\"id\" required></label> \
         <button type=\"submit\">Find</button></form></div>",
        escape(message_type.unwrap_or("")),
        queue = escape(&base.to("/queue")),
        job = escape(&base.to("/job")),
    )
}

/// The jobs of the page, each with a box to select it, and the selection's actions.
fn jobs_table(
    state: &State,
    base: &Base,
    priority: Priority,
    shown: QueueState,
    messages: &[Message],
    here: &str,
) -> String {
    if messages.is_empty() {
        return "<p class=\"empty\">No jobs here.</p>".to_owned();
    }
    let selectable = !state.read_only && !actions_for(shown).is_empty();
    let rows: Vec<Vec<Cell>> = messages
        .iter()
        .map(|m| {
            let mut row = Vec::new();
            if selectable {
                row.push(Cell::Html(format!(
                    "<input type=\"checkbox\" name=\"id\" value=\"{}\" aria-label=\"select {}\">",
                    escape(m.id()),
                    escape(m.id())
                )));
            }
            row.extend([
                Cell::Html(format!(
                    "<a class=\"job\" href=\"{}\">{}</a>",
                    escape(&job_link(base, priority, m.id())),
                    escape(m.id())
                )),
                Cell::Text(m.message_type().to_owned()),
                Cell::Text(unix_rfc3339(m.created())),
                Cell::Text(unix_rfc3339(m.due())),
                Cell::Text(m.retries().to_string()),
                Cell::Html(format!("<code>{}</code>", escape(&preview(m)))),
            ]);
            row
        })
        .collect();
    let mut header = Vec::new();
    if selectable {
        header.push("");
    }
    header.extend(["id", "type", "created", "due", "retries", "payload"]);
    let list = table(&header, &rows);
    if !selectable {
        return list;
    }
    format!(
        "<form method=\"post\" class=\"selection\" action=\"{}\">{}{list}<p>With the selected \
         jobs: {}</p></form><script src=\"{}\"></script>",
        escape(&base.to("/jobs/delete")),
        hidden(state, priority, here),
        buttons(base, actions_for(shown)),
        escape(&base.to("/assets/actions.js")),
    )
}
