//! `/`: the totals of every queue, the messages handled and failed since the dashboard started,
//! and the throughput chart, refreshed by the page's script from `api/overview`.

use std::sync::Arc;

use axum::extract::State as Shared;
use axum::response::{Html, IntoResponse, Response};
use hermes_core::inspect::{Figure, QueueStats};
use serde_json::json;

use crate::base::Base;
use crate::html::{escape, page as frame};
use crate::state::State;
use crate::view::unix_rfc3339;

/// The sum of one figure over every queue: `~n` when any is approximate, `?` when any is
/// unknown.
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

/// `/`: the overview page.
pub(crate) async fn page(Shared(state): Shared<Arc<State>>, base: Base) -> Response {
    let stats = match super::stats(&state, &base).await {
        Ok(stats) => stats,
        Err(failed) => return failed,
    };
    let mut cards = String::from("<div class=\"cards\">");
    for (id, name, figure) in totals(&state, &stats) {
        cards.push_str(&format!(
            "<div class=\"card\"><b id=\"{id}\">{}</b>{name}</div>",
            escape(&figure)
        ));
    }
    cards.push_str("</div>");
    let history = match super::history::read(&state, &base).await {
        Ok(history) => super::history::section(history.as_ref(), &stats),
        Err(failed) => return failed,
    };
    let since = unix_rfc3339(state.sampler.throughput().since);
    let chart = format!(
        "<h2>Throughput</h2><p class=\"note\">Handled (blue) and failed (red) messages per \
         second over the last five minutes, from the workers' announcements; handled and failed \
         count since {since}. <span id=\"chart-now\"></span> \
         <span id=\"chart-span\"></span></p><div class=\"chart\">\
         <span id=\"chart-top\"></span><svg id=\"chart\" viewBox=\"0 0 600 160\" \
         preserveAspectRatio=\"none\" role=\"img\" aria-label=\"throughput\"></svg></div>"
    );
    Html(frame(
        &base,
        &format!("Overview ({})", state.driver.name()),
        &format!(
            "{cards}{chart}{history}<h2>Queues</h2><div id=\"queues\">{}</div>\
             <script src=\"{}\" data-api=\"{}\"></script>",
            super::queue_table(&base, &stats),
            base.to("/assets/overview.js"),
            escape(&base.to("/api/overview")),
        ),
    ))
    .into_response()
}

/// `api/overview`: the overview's counters, chart and queue table (as escaped HTML) as JSON,
/// for its script.
pub(crate) async fn api(Shared(state): Shared<Arc<State>>, base: Base) -> Response {
    let stats = match super::stats(&state, &base).await {
        Ok(stats) => stats,
        Err(failed) => return failed,
    };
    let totals: serde_json::Map<String, serde_json::Value> = totals(&state, &stats)
        .into_iter()
        .map(|(id, _, figure)| (id.to_owned(), figure.into()))
        .collect();
    axum::Json(json!({
        "totals": totals,
        "throughput": state.sampler.throughput(),
        "queues_html": super::queue_table(&base, &stats),
    }))
    .into_response()
}
