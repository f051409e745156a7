//! The pages, the actions and the JSON API, one file per page.

pub(crate) mod actions;
pub(crate) mod api;
pub(crate) mod assets;
pub(crate) mod cron;
pub(crate) mod dead;
pub(crate) mod groups;
pub(crate) mod history;
pub(crate) mod job;
pub(crate) mod limits;
pub(crate) mod overview;
pub(crate) mod queue;
pub(crate) mod queues;
pub(crate) mod workers;

use axum::response::Response;
use hermes_core::inspect::{QueueState, QueueStats};

use crate::base::Base;
use crate::html::{Cell, escape, table};
use crate::state::State;
use crate::view::latency;

/// Every queue's figures, or the page saying why not.
async fn stats(state: &State, base: &Base) -> Result<Vec<QueueStats>, Response> {
    state
        .call(base, async { state.inspect()?.stats().await })
        .await
}

/// The table of every queue's figures, each queue's name a link to its jobs.
fn queue_table(base: &Base, stats: &[QueueStats]) -> String {
    let rows: Vec<Vec<Cell>> = stats
        .iter()
        .map(|q| {
            vec![
                Cell::Html(format!(
                    "<a class=\"queue\" href=\"{}\">{}</a>",
                    escape(&queue::link(
                        base,
                        q.priority,
                        QueueState::Waiting,
                        None,
                        None
                    )),
                    escape(&q.name)
                )),
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
