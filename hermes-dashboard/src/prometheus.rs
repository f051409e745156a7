//! `/metrics`: the queue gauges from the inspection contract and the live workers' counts, in
//! Prometheus' text format.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::State as Shared;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use hermes_core::inspect::{Figure, QueueStats};
use hermes_core::workers::WorkerInfo;

use crate::state::State;

/// `metrics`: the gauges of every queue: a figure the backend cannot tell is left out, never guessed.
pub(crate) async fn metrics(Shared(state): Shared<Arc<State>>) -> Response {
    let stats = match within(&state, async { state.inspect()?.stats().await }).await {
        Ok(stats) => stats,
        Err(failed) => return failed,
    };
    let mut text = render(&stats);
    if let Some(workers) = state.driver.workers() {
        match within(&state, workers.list()).await {
            Ok(workers) => text.push_str(&render_workers(&workers)),
            Err(failed) => return failed,
        }
    }
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// Runs a backend call within the dashboard's timeout; a failure is a plain-text answer
/// (502 for an error, 504 for no answer in time), as a scraper reads it.
async fn within<T>(
    state: &State,
    work: impl Future<Output = Result<T, hermes_core::Error>>,
) -> Result<T, Response> {
    match tokio::time::timeout(state.timeout, work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err((axum::http::StatusCode::BAD_GATEWAY, e.to_string()).into_response()),
        Err(_) => {
            Err((axum::http::StatusCode::GATEWAY_TIMEOUT, "no answer in time").into_response())
        }
    }
}

/// A worker's series: its name, its type, its help text and its value.
type WorkerSeries = (
    &'static str,
    &'static str,
    &'static str,
    fn(&WorkerInfo) -> f64,
);

/// The exposition text of the live `workers`: how many there are, and per worker its counts
/// since it started (counters, reset when it restarts) and how busy it is.
pub(crate) fn render_workers(workers: &[WorkerInfo]) -> String {
    let mut text = format!(
        "# HELP hermes_workers Live workers\n# TYPE hermes_workers gauge\nhermes_workers {}\n",
        workers.len()
    );
    let series: [WorkerSeries; 4] = [
        (
            "hermes_worker_handled_total",
            "counter",
            "Messages the worker handled since it started, failed ones included",
            |w| w.handled as f64,
        ),
        (
            "hermes_worker_failed_total",
            "counter",
            "Messages the worker failed since it started",
            |w| w.failed as f64,
        ),
        (
            "hermes_worker_busy",
            "gauge",
            "Messages the worker handles now",
            |w| w.busy as f64,
        ),
        (
            "hermes_worker_concurrency",
            "gauge",
            "Messages the worker may handle at once",
            |w| w.concurrency as f64,
        ),
    ];
    for (name, kind, help, value) in series {
        let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for worker in workers {
            let _ = writeln!(
                text,
                "{name}{{worker=\"{}\",host=\"{}\"}} {}",
                label(&worker.id),
                label(&worker.host),
                value(worker)
            );
        }
    }
    text
}

/// A gauge: its name, its help text, and its value for a queue (`None`: unknown).
type Gauge = (&'static str, &'static str, fn(&QueueStats) -> Option<f64>);

/// The exposition text of `stats`.
pub(crate) fn render(stats: &[QueueStats]) -> String {
    let mut text = String::new();
    let gauges: [Gauge; 6] = [
        ("hermes_queue_waiting", "Messages due now", |q| {
            count(q.waiting)
        }),
        ("hermes_queue_delayed", "Messages due later", |q| {
            count(q.delayed)
        }),
        (
            "hermes_queue_in_flight",
            "Messages claimed, not yet acknowledged",
            |q| count(q.in_flight),
        ),
        ("hermes_queue_dead", "Dead letters", |q| count(q.dead)),
        (
            "hermes_queue_oldest_age_seconds",
            "How long the oldest waiting message has been due",
            |q| q.latency.value().map(|d| d.as_secs_f64()),
        ),
        (
            "hermes_queue_consumers",
            "Consumers the broker counts on the queue",
            |q| count(q.consumers),
        ),
    ];
    for (name, help, value) in gauges {
        let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} gauge");
        for queue in stats {
            if let Some(v) = value(queue) {
                let _ = writeln!(
                    text,
                    "{name}{{queue=\"{}\",priority=\"{}\"}} {v}",
                    label(&queue.name),
                    queue.priority
                );
            }
        }
    }
    text
}

fn count(figure: Figure<u64>) -> Option<f64> {
    figure.value().map(|n| n as f64)
}

/// A label value with `\`, `"` and newlines escaped.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn unknown_figures_are_left_out_and_labels_escaped() {
        let mut queue = QueueStats::unknown("jobs\"x", 100);
        queue.waiting = Figure::Exact(3);
        queue.delayed = Figure::Approximate(2);
        queue.latency = Figure::Exact(Duration::from_millis(1500));
        queue.consumers = Figure::Exact(2);
        let text = render(&[queue]);
        assert!(text.contains("hermes_queue_consumers{queue=\"jobs\\\"x\",priority=\"100\"} 2\n"));
        assert!(
            text.contains("hermes_queue_waiting{queue=\"jobs\\\"x\",priority=\"100\"} 3\n"),
            "{text}"
        );
        assert!(text.contains("hermes_queue_delayed{queue=\"jobs\\\"x\",priority=\"100\"} 2\n"));
        assert!(text.contains(
            "hermes_queue_oldest_age_seconds{queue=\"jobs\\\"x\",priority=\"100\"} 1.5\n"
        ));
        assert!(
            !text.contains("hermes_queue_in_flight{"),
            "unknown, so absent"
        );
        assert!(text.contains("# TYPE hermes_queue_dead gauge"));
    }

    #[test]
    fn every_worker_has_its_counts() {
        let mut worker = WorkerInfo::new(4, &[], Duration::from_secs(30));
        worker.id = "w\"1".to_owned();
        worker.host = "h".to_owned();
        worker.handled = 12;
        worker.failed = 2;
        worker.busy = 3;
        let text = render_workers(&[worker]);
        assert!(text.contains("hermes_workers 1\n"), "{text}");
        assert!(text.contains("# TYPE hermes_worker_handled_total counter\n"));
        assert!(text.contains("hermes_worker_handled_total{worker=\"w\\\"1\",host=\"h\"} 12\n"));
        assert!(text.contains("hermes_worker_failed_total{worker=\"w\\\"1\",host=\"h\"} 2\n"));
        assert!(text.contains("hermes_worker_busy{worker=\"w\\\"1\",host=\"h\"} 3\n"));
        assert!(text.contains("hermes_worker_concurrency{worker=\"w\\\"1\",host=\"h\"} 4\n"));
    }
}
