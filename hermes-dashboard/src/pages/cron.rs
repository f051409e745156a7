//! `cron`: the cron entries the live workers' schedulers announce, with their last and next
//! ticks.

use std::sync::Arc;

use axum::extract::State as Shared;
use axum::response::{Html, IntoResponse, Response};

use crate::base::Base;
use crate::html::{Cell, escape, live_page, table};
use crate::state::State;
use crate::view::{cron_entries, unix_rfc3339};

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
            vec![
                Cell::Text(e.entry.name.clone()),
                Cell::Html(format!("<code>{}</code>", escape(&e.entry.expression))),
                Cell::Text(e.entry.zone.clone()),
                Cell::Text(e.entry.message_type.clone()),
                Cell::Text(e.entry.priority.to_string()),
                Cell::Text(at(e.previous)),
                Cell::Text(at(e.next)),
                Cell::Text(e.workers.to_string()),
            ]
        })
        .collect();
    let body = table(
        &[
            "entry",
            "schedule",
            "zone",
            "type",
            "priority",
            "last tick",
            "next tick",
            "workers",
        ],
        &rows,
    );
    Html(live_page(&base, "Cron", &body)).into_response()
}
