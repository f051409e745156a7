//! The stylesheet and the script, compiled into the binary.

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [(CONTENT_TYPE, content_type), (CACHE_CONTROL, "max-age=300")],
        body,
    )
        .into_response()
}

/// `assets/overview.js`: the overview's live refresh.
pub(crate) async fn overview_script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../../assets/overview.js"),
    )
}

/// `assets/style.css`: every page's style.
pub(crate) async fn style() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("../../assets/style.css"),
    )
}

/// `assets/actions.js`: confirming destructive actions, selecting every job of a page.
pub(crate) async fn actions_script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../../assets/actions.js"),
    )
}

/// `assets/live.js`: the live refresh and its pause button.
pub(crate) async fn live_script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../../assets/live.js"),
    )
}
