//! `groups`: the batches and workflows kept, the last created first, a page at a time from
//! the backend, each with its progress; and one found by id: a batch's counts and callbacks, a
//! workflow's steps.

use std::sync::Arc;

use axum::extract::{Query, State as Shared};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use hermes_core::tracking::{BatchStatus, GroupKind, GroupRequest, GroupState, WorkflowStatus};
use hermes_core::{DEFAULT_PRIORITY, Emitter};
use serde::Deserialize;

use crate::base::Base;
use crate::html::{Cell, escape, live_page, query_value, table};
use crate::pages::queue::job_link;
use crate::state::State;
use crate::view::{batch_state, callback, step_state, unix_rfc3339, workflow_state};

/// Which batch or workflow `groups` shows; none for the list.
#[derive(Deserialize)]
pub(crate) struct GroupQuery {
    #[serde(default)]
    id: Option<String>,
    /// Where the list's page starts.
    #[serde(default)]
    cursor: Option<String>,
}

/// How many groups a page of the list shows.
const GROUPS_PER_PAGE: usize = 25;

fn field(name: &str, value: impl Into<String>) -> Vec<Cell> {
    vec![Cell::Text(name.to_owned()), Cell::Text(value.into())]
}

/// `groups`: the search form, and the batch or workflow asked for.
pub(crate) async fn page(
    Shared(state): Shared<Arc<State>>,
    base: Base,
    Query(query): Query<GroupQuery>,
) -> Response {
    let id = query.id.as_deref().filter(|id| !id.is_empty());
    let mut body = format!(
        "<form method=\"get\" action=\"{}\"><label>Batch or workflow id \
         <input name=\"id\" value=\"{}\" required></label> <button type=\"submit\">Show</button>\
         </form>",
        escape(&base.to("/groups")),
        escape(id.unwrap_or(""))
    );
    if state.driver.jobs().is_none() {
        body.push_str(&format!(
            "<p>The {} backend keeps no batches or workflows here: its workers keep them in the \
             state store they were given.</p>",
            escape(state.driver.name())
        ));
        return Html(live_page(&base, "Batches and workflows", &body)).into_response();
    }
    let Some(id) = id else {
        let mut request = GroupRequest::new(GROUPS_PER_PAGE);
        if let Some(cursor) = &query.cursor {
            request = request.after(cursor.clone());
        }
        let page = match state
            .call(&base, async { state.jobs()?.groups(&request).await })
            .await
        {
            Ok(page) => page,
            Err(failed) => return failed,
        };
        body.push_str(&list_html(&base, &page.groups));
        let mut pager = Vec::new();
        if query.cursor.is_some() {
            pager.push(format!(
                "<a class=\"first\" href=\"{}\">First page</a>",
                escape(&base.to("/groups"))
            ));
        }
        if let Some(next) = &page.next {
            pager.push(format!(
                "<a class=\"next\" href=\"{}?cursor={}\">Next page</a>",
                escape(&base.to("/groups")),
                escape(&query_value(next))
            ));
        }
        if !pager.is_empty() {
            body.push_str(&format!("<p class=\"pager\">{}</p>", pager.join(" ")));
        }
        return Html(live_page(&base, "Batches and workflows", &body)).into_response();
    };
    let emitter = Emitter::from_arc(state.driver.clone());
    let found = state
        .call(&base, async {
            Ok((
                emitter.batch_status(id).await?,
                emitter.workflow_status(id).await?,
            ))
        })
        .await;
    let status = match found {
        Ok((Some(batch), _)) => (StatusCode::OK, batch_html(&batch)),
        Ok((None, Some(workflow))) => (StatusCode::OK, workflow_html(&base, &workflow)),
        Ok((None, None)) => (
            StatusCode::NOT_FOUND,
            format!(
                "<p>No batch or workflow {}: it was never opened, or it expired.</p>",
                escape(id)
            ),
        ),
        Err(failed) => return failed,
    };
    body.push_str(&status.1);
    (
        status.0,
        Html(live_page(&base, "Batches and workflows", &body)),
    )
        .into_response()
}

/// The groups of a page of the list: each links to its own page, with its progress.
fn list_html(base: &Base, groups: &[GroupState]) -> String {
    if groups.is_empty() {
        return "<p class=\"empty\">No batches or workflows kept.</p>".to_owned();
    }
    let rows: Vec<Vec<Cell>> = groups
        .iter()
        .map(|g| {
            let kind = match g.spec.kind {
                GroupKind::Batch { .. } => "batch",
                GroupKind::Workflow { .. } => "workflow",
                _ => "group",
            };
            let done = g.tally.succeeded + g.tally.failed;
            let state = match (g.finished, g.tally.failed) {
                (None, _) => "running",
                (Some(_), 0) => "succeeded",
                (Some(_), _) => "finished with failures",
            };
            vec![
                Cell::Html(format!(
                    "<a class=\"group\" href=\"{}?id={}\">{}</a>",
                    escape(&base.to("/groups")),
                    escape(&query_value(&g.spec.id)),
                    escape(&g.spec.id)
                )),
                Cell::Text(kind.to_owned()),
                Cell::Text(g.spec.description.clone().unwrap_or_default()),
                Cell::Text(unix_rfc3339(g.spec.created)),
                Cell::Html(format!(
                    "<progress max=\"{}\" value=\"{done}\"></progress> {done} of {}",
                    g.tally.total.max(1),
                    g.tally.total
                )),
                Cell::Text(g.tally.succeeded.to_string()),
                Cell::Text(g.tally.failed.to_string()),
                Cell::Text(state.to_owned()),
            ]
        })
        .collect();
    table(
        &[
            "id",
            "kind",
            "description",
            "created",
            "progress",
            "succeeded",
            "failed",
            "state",
        ],
        &rows,
    )
}

/// A batch: a progress bar of its finished jobs, its counts and its callbacks.
fn batch_html(status: &BatchStatus) -> String {
    let finished = status.succeeded + status.failed;
    let mut rows = vec![
        field("batch", status.id.clone()),
        field("state", batch_state(status)),
        field("total", status.total.to_string()),
        field("pending", status.pending.to_string()),
        field("succeeded", status.succeeded.to_string()),
        field("failed", status.failed.to_string()),
        field("on success", callback(status.on_success)),
        field("on complete", callback(status.on_complete)),
        field("created", unix_rfc3339(status.created)),
    ];
    if let Some(description) = &status.description {
        rows.insert(1, field("description", description.clone()));
    }
    if let Some(at) = status.finished {
        rows.push(field("finished", unix_rfc3339(at)));
    }
    if let Some(parent) = &status.parent {
        rows.push(field("within", parent.clone()));
    }
    format!(
        "<h2>Batch</h2><p><progress max=\"{}\" value=\"{finished}\">{finished} of {}</progress> \
         {finished} of {} finished</p>{}",
        status.total.max(1),
        status.total,
        status.total,
        table(&["", ""], &rows)
    )
}

/// A workflow: its state and each step's.
fn workflow_html(base: &Base, status: &WorkflowStatus) -> String {
    let done = status
        .steps
        .iter()
        .filter(|s| step_state(&s.state) == "succeeded")
        .count();
    let steps: Vec<Vec<Cell>> = status
        .steps
        .iter()
        .map(|s| {
            vec![
                Cell::Text(s.name.clone()),
                Cell::Text(s.message_type.clone()),
                Cell::Html(format!(
                    "<a class=\"job\" href=\"{}\">{}</a>",
                    escape(&job_link(base, DEFAULT_PRIORITY, &s.id)),
                    escape(&s.id)
                )),
                Cell::Text(step_state(&s.state)),
            ]
        })
        .collect();
    let mut rows = vec![
        field("workflow", status.id.clone()),
        field("state", workflow_state(&status.state)),
        field("created", unix_rfc3339(status.created)),
    ];
    if let Some(at) = status.finished {
        rows.push(field("finished", unix_rfc3339(at)));
    }
    format!(
        "<h2>Workflow</h2><p><progress max=\"{}\" value=\"{done}\"></progress> {done} of {} \
         steps succeeded</p>{}<h2>Steps</h2>{}",
        status.steps.len().max(1),
        status.steps.len(),
        table(&["", ""], &rows),
        table(&["step", "type", "job", "state"], &steps)
    )
}
