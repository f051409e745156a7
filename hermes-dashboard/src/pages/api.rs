//! `api/stats`: the figures as JSON.

use std::sync::Arc;

use axum::extract::State as Shared;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::base::Base;
use crate::state::State;
use crate::view::queue_json;

/// `api/stats`: `{"driver": …, "queues": […]}`, each queue as [`queue_json`] shows it (and as
/// `hermes stats --json` prints it).
pub(crate) async fn stats(Shared(state): Shared<Arc<State>>, base: Base) -> Response {
    match super::stats(&state, &base).await {
        Ok(stats) => {
            let queues: Vec<_> = stats.iter().map(queue_json).collect();
            axum::Json(json!({ "driver": state.driver.name(), "queues": queues })).into_response()
        }
        Err(failed) => failed,
    }
}
