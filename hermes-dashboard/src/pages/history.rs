//! What the workers did over time, from the backend's counters: the overview's charts (per
//! minute for the last hour, per hour for the last 48 hours) and `types`, each job type's
//! figures over the same windows.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State as Shared;
use axum::response::{Html, IntoResponse, Response};
use hermes_core::Priority;
use hermes_core::history::{
    QueueWaits, TypeFigures, bucket_start, figures, last_hours, last_minutes, queue_waits, series,
};
use hermes_core::inspect::QueueStats;
use hermes_core::time::unix_now;
use serde_json::json;

use crate::base::Base;
use crate::chart::{Line, bars, lines};
use crate::html::{Cell, live_page, table};
use crate::state::State;
use crate::view::unix_rfc3339;

/// Minutes in the minute chart.
const MINUTES: usize = 60;
/// Hours in the hour chart.
const HOURS: usize = 48;

type Read = Vec<(String, Vec<(String, u64)>)>;

/// The counters of the last hour's minutes and the last 48 hours, as read at one moment.
pub(crate) struct History {
    minute_buckets: Vec<String>,
    hour_buckets: Vec<String>,
    minutes: Read,
    hours: Read,
}

/// The history, `None` on a backend without counters.
pub(crate) async fn read(state: &State, base: &Base) -> Result<Option<History>, Response> {
    let Some(counters) = state.driver.counters() else {
        return Ok(None);
    };
    let now = unix_now();
    let minute_buckets = last_minutes(now, MINUTES);
    let hour_buckets = last_hours(now, HOURS);
    let (minutes, hours) = state
        .call(base, async {
            Ok((
                counters.read(&minute_buckets).await?,
                counters.read(&hour_buckets).await?,
            ))
        })
        .await?;
    Ok(Some(History {
        minute_buckets,
        hour_buckets,
        minutes,
        hours,
    }))
}

fn clock(at: f64) -> String {
    let shown = unix_rfc3339(at);
    shown
        .get(11..16)
        .map_or_else(|| shown.clone(), |hm| format!("{hm}Z"))
}

fn day_and_hour(at: f64) -> String {
    let shown = unix_rfc3339(at);
    shown
        .get(5..13)
        .map_or_else(|| shown.clone(), |dh| format!("{}h", dh.replace('T', " ")))
}

/// A chart of the 95th percentile wait of each queue in `buckets`, named as in `stats`.
fn waits_chart(
    id: &str,
    title: &str,
    buckets: &[String],
    read: &Read,
    stats: &[QueueStats],
    label: impl Fn(f64) -> String,
) -> String {
    let name = |priority: Priority| {
        stats
            .iter()
            .find(|q| q.priority == priority)
            .map_or_else(|| format!("priority {priority}"), |q| q.name.clone())
    };
    let shown: Vec<Line> = queue_waits(buckets, read)
        .into_iter()
        .map(|waits| Line {
            name: name(waits.priority),
            values: waits
                .p95
                .iter()
                .map(|d| d.map(|d| d.as_millis() as f64))
                .collect(),
        })
        .collect();
    let ats: Vec<f64> = buckets.iter().filter_map(|b| bucket_start(b)).collect();
    lines(id, title, "ms", &ats, &shown, label)
}

/// The overview's history: its charts (messages handled and failed, each queue's waits), or
/// why there are none; queues are named as in `stats`.
pub(crate) fn section(history: Option<&History>, stats: &[QueueStats]) -> String {
    let Some(history) = history else {
        return "<h2>History</h2><p class=\"note\">This backend keeps no counters: the history \
                needs Redis, PostgreSQL, the filesystem, or a state store of one of them."
            .to_owned();
    };
    let minutes = series(&history.minute_buckets, &history.minutes);
    let hours = series(&history.hour_buckets, &history.hours);
    format!(
        "<h2>History</h2><p class=\"note\">Messages handled (blue) and failed (red), as the \
         workers count them, kept by the backend.</p><div class=\"charts\">{}{}</div>",
        bars(
            "per-minute",
            "Per minute, the last hour",
            "msgs/min",
            &minutes,
            clock
        ),
        bars(
            "per-hour",
            "Per hour, the last 48 hours",
            "msgs/h",
            &hours,
            day_and_hour
        ),
    ) + &format!(
        "<h2>Latency per queue</h2><p class=\"note\">How long 95 in 100 of the messages \
         started in each minute or hour had waited past their due time, per queue (the bound of \
         the histogram bucket holding it).</p><div class=\"charts\">{}{}</div>",
        waits_chart(
            "waits-per-minute",
            "Per minute, the last hour",
            &history.minute_buckets,
            &history.minutes,
            stats,
            clock
        ),
        waits_chart(
            "waits-per-hour",
            "Per hour, the last 48 hours",
            &history.hour_buckets,
            &history.hours,
            stats,
            day_and_hour
        ),
    )
}

/// The history as JSON, for scripts and scrapers.
pub(crate) fn to_json(history: &History) -> serde_json::Value {
    json!({
        "per_minute": series(&history.minute_buckets, &history.minutes),
        "per_hour": series(&history.hour_buckets, &history.hours),
        "waits_per_minute": waits_json(&history.minute_buckets, &history.minutes),
        "waits_per_hour": waits_json(&history.hour_buckets, &history.hours),
    })
}

/// Each queue's waits as JSON: its priority, and per bucket its start and the p50 and p95
/// waits in milliseconds (`null` where none started).
fn waits_json(buckets: &[String], read: &Read) -> serde_json::Value {
    let ms = |d: &Option<Duration>| d.map(|d| d.as_millis() as u64);
    let queues: Vec<serde_json::Value> = queue_waits(buckets, read)
        .iter()
        .map(
            |QueueWaits {
                 priority, p95, p50, ..
             }| {
                let points: Vec<serde_json::Value> = buckets
                .iter()
                .zip(p50.iter().zip(p95))
                .map(|(bucket, (p50, p95))| {
                    json!({ "at": bucket_start(bucket), "p50_ms": ms(p50), "p95_ms": ms(p95) })
                })
                .collect();
                json!({ "priority": priority, "points": points })
            },
        )
        .collect();
    serde_json::Value::Array(queues)
}

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".to_owned(), |d| format!("≤ {} ms", d.as_millis()))
}

fn rows(figures: &[TypeFigures]) -> Vec<Vec<Cell>> {
    figures
        .iter()
        .map(|f| {
            vec![
                Cell::Text(f.message_type.clone()),
                Cell::Text(f.handled.to_string()),
                Cell::Text(f.failed.to_string()),
                Cell::Text(f.retried.to_string()),
                Cell::Text(ms(f.duration_p50)),
                Cell::Text(ms(f.duration_p95)),
                Cell::Text(ms(f.wait_p50)),
                Cell::Text(ms(f.wait_p95)),
            ]
        })
        .collect()
}

const HEADER: [&str; 8] = [
    "type",
    "handled",
    "failed",
    "retried",
    "p50 duration",
    "p95 duration",
    "p50 wait",
    "p95 wait",
];

/// `types`: per job type, what the workers did in the last hour and the last 48 hours.
pub(crate) async fn types(Shared(state): Shared<Arc<State>>, base: Base) -> Response {
    let history = match read(&state, &base).await {
        Ok(history) => history,
        Err(failed) => return failed,
    };
    let Some(history) = history else {
        return Html(live_page(&base, "Job types", &section(None, &[]))).into_response();
    };
    let hour = figures(&history.minutes);
    let days = figures(&history.hours);
    let body = format!(
        "<p class=\"note\">Durations and waits are the bound of the histogram bucket holding the \
         quantile; the wait is from a message's due time to its start.</p>\
         <h2>The last hour</h2>{}<h2>The last 48 hours</h2>{}",
        if hour.is_empty() {
            "<p class=\"empty\">Nothing handled.</p>".to_owned()
        } else {
            table(&HEADER, &rows(&hour))
        },
        if days.is_empty() {
            "<p class=\"empty\">Nothing handled.</p>".to_owned()
        } else {
            table(&HEADER, &rows(&days))
        },
    );
    Html(live_page(
        &base,
        &format!("Job types ({})", state.driver.name()),
        &body,
    ))
    .into_response()
}

/// `api/history`: the charts' points as JSON; `null` without counters.
pub(crate) async fn api(Shared(state): Shared<Arc<State>>, base: Base) -> Response {
    match read(&state, &base).await {
        Ok(history) => axum::Json(history.as_ref().map(to_json)).into_response(),
        Err(failed) => failed,
    }
}
