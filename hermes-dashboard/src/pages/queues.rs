//! `queues`: every queue's figures.

use std::sync::Arc;

use axum::extract::State as Shared;
use axum::response::{Html, IntoResponse, Response};

use crate::base::Base;
use crate::html::live_page as live_frame;
use crate::state::State;

/// `queues`: the figures table.
pub(crate) async fn page(Shared(state): Shared<Arc<State>>, base: Base) -> Response {
    match super::stats(&state, &base).await {
        Ok(stats) => Html(live_frame(
            &base,
            "Queues",
            &super::queue_table(&base, &stats),
        ))
        .into_response(),
        Err(failed) => failed,
    }
}
