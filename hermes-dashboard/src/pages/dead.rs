//! `dead`: every queue's dead letters with their reasons; `dead/show`: one, with its message;
//! the replay and delete actions.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Query, State as Shared};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use hermes_core::inspect::Replay;
use hermes_core::{DEFAULT_PRIORITY, Priority};
use serde::Deserialize;

use crate::base::Base;
use crate::html::{Cell, escape, live_page as live_frame, page as frame, query_value, table};
use crate::state::State;
use crate::view::{message_json, unix_rfc3339};

/// A form posting `action` for the dead letter `id` (every one when `None`) of `priority`.
fn action(
    state: &State,
    base: &Base,
    action: &str,
    label: &str,
    priority: Priority,
    id: Option<&str>,
) -> String {
    let all = if id.is_none() { "-all" } else { "" };
    let confirm = match (action, id.is_none()) {
        ("delete", false) => " data-confirm=\"Delete this dead letter for good?\"",
        ("delete", true) => " data-confirm=\"Delete every dead letter of this queue for good?\"",
        (_, true) => " data-confirm=\"Replay every dead letter of this queue?\"",
        _ => "",
    };
    let id = id.map_or_else(String::new, |id| {
        format!(
            "<input type=\"hidden\" name=\"id\" value=\"{}\">",
            escape(id)
        )
    });
    format!(
        "<form method=\"post\" action=\"{}\"><input type=\"hidden\" name=\"token\" \
         value=\"{}\"><input type=\"hidden\" name=\"priority\" value=\"{priority}\">{id}\
         <button type=\"submit\" class=\"{action}{all}\"{confirm}>{label}</button></form>",
        escape(&base.to(&format!("/dead/{action}"))),
        state.token
    )
}

/// `dead`: every queue's dead letters (the first 100 of each) with their reasons, and (unless
/// read-only) replay and delete buttons.
pub(crate) async fn page(Shared(state): Shared<Arc<State>>, base: Base) -> Response {
    let stats = match super::stats(&state, &base).await {
        Ok(stats) => stats,
        Err(failed) => return failed,
    };
    let mut body = String::new();
    for queue in &stats {
        let letters = match state
            .call(&base, async {
                state.dead_letters()?.list(queue.priority, 100).await
            })
            .await
        {
            Ok(letters) => letters,
            Err(failed) => return failed,
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
                &base,
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
                        "<a class=\"show\" href=\"{}?priority={}&amp;id={}\">{}</a>",
                        escape(&base.to("/dead/show")),
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
                        action(
                            &state,
                            &base,
                            "replay",
                            "Replay",
                            queue.priority,
                            Some(&l.id)
                        ),
                        action(
                            &state,
                            &base,
                            "delete",
                            "Delete",
                            queue.priority,
                            Some(&l.id)
                        )
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
    body.push_str(&actions_script(&base));
    Html(live_frame(&base, "Dead letters", &body)).into_response()
}

/// The script asking before a destructive action.
fn actions_script(base: &Base) -> String {
    format!(
        "<script src=\"{}\"></script>",
        escape(&base.to("/assets/actions.js"))
    )
}

fn default_priority() -> Priority {
    DEFAULT_PRIORITY
}

/// Which dead letter `dead/show` shows.
#[derive(Deserialize)]
pub(crate) struct LetterQuery {
    #[serde(default = "default_priority")]
    priority: Priority,
    id: String,
}

/// `dead/show`: one dead letter, its reason and its message, with (unless read-only) replay
/// and delete buttons.
pub(crate) async fn letter(
    Shared(state): Shared<Arc<State>>,
    base: Base,
    Query(query): Query<LetterQuery>,
) -> Response {
    let letters = match state
        .call(&base, async {
            state.dead_letters()?.list(query.priority, usize::MAX).await
        })
        .await
    {
        Ok(letters) => letters,
        Err(failed) => return failed,
    };
    let Some(letter) = letters.iter().find(|l| l.id == query.id) else {
        return (
            StatusCode::NOT_FOUND,
            Html(frame(
                &base,
                "Dead letter",
                &format!("<p>No dead letter {}.</p>", escape(&query.id)),
            )),
        )
            .into_response();
    };
    let reason = &letter.reason;
    let field = |name: &str, value: String| vec![Cell::Text(name.to_owned()), Cell::Text(value)];
    let rows = vec![
        field("id", letter.id.clone()),
        field("priority", letter.priority.to_string()),
        field("kind", reason.kind.to_string()),
        field(
            "handler",
            reason.handler.clone().unwrap_or_else(|| "-".to_owned()),
        ),
        field("at", unix_rfc3339(reason.at)),
        field("retries", reason.retries.to_string()),
        field("error", reason.error.clone()),
    ];
    let message = letter.message.as_ref().map_or_else(
        || "<p>The body could not be decoded.</p>".to_owned(),
        |m| {
            format!(
                "<h2>Message</h2><pre>{}</pre>",
                escape(&serde_json::to_string_pretty(&message_json(m)).unwrap_or_default())
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
                &base,
                "replay",
                "Replay",
                letter.priority,
                Some(&letter.id)
            ),
            action(
                &state,
                &base,
                "delete",
                "Delete",
                letter.priority,
                Some(&letter.id)
            )
        )
    };
    Html(frame(
        &base,
        "Dead letter",
        &format!(
            "{}{message}{actions}{}",
            table(&["", ""], &rows),
            actions_script(&base)
        ),
    ))
    .into_response()
}

/// What an action posts.
#[derive(Deserialize)]
pub(crate) struct ActionForm {
    token: String,
    #[serde(default = "default_priority")]
    priority: Priority,
    id: Option<String>,
}

fn refused() -> Response {
    (
        StatusCode::FORBIDDEN,
        "the form's token is not this dashboard's",
    )
        .into_response()
}

/// `POST dead/replay`: replays one dead letter (`id`) or all of a queue's.
pub(crate) async fn replay(
    Shared(state): Shared<Arc<State>>,
    base: Base,
    Form(form): Form<ActionForm>,
) -> Response {
    if !state.carries_token(&form.token) {
        return refused();
    }
    let replay = form
        .id
        .as_ref()
        .map_or_else(Replay::all, |id| Replay::ids([id.clone()]));
    match state
        .call(&base, async {
            state.dead_letters()?.replay(form.priority, &replay).await
        })
        .await
    {
        Ok(_) => Redirect::to(&base.to("/dead")).into_response(),
        Err(failed) => failed,
    }
}

/// `POST dead/delete`: removes one dead letter.
pub(crate) async fn delete(
    Shared(state): Shared<Arc<State>>,
    base: Base,
    Form(form): Form<ActionForm>,
) -> Response {
    if !state.carries_token(&form.token) {
        return refused();
    }
    let Some(id) = form.id.as_deref() else {
        return (StatusCode::BAD_REQUEST, "no dead letter named").into_response();
    };
    match state
        .call(&base, async {
            state.browse()?.delete(form.priority, id).await
        })
        .await
    {
        Ok(_) => Redirect::to(&base.to("/dead")).into_response(),
        Err(failed) => failed,
    }
}
