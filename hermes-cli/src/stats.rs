//! `hermes stats`: every queue's figures, as a table or JSON.

use std::time::Duration;

use hermes_core::{Driver, Figure, QueueStats};
use serde_json::{Value, json};

use crate::Failure;

/// Prints the figures of every queue.
pub(crate) async fn stats(driver: &dyn Driver, json: bool) -> Result<(), Failure> {
    let stats = driver.stats().await?;
    if json {
        let queues: Vec<Value> = stats.iter().map(to_json).collect();
        println!("{}", json!({ "driver": driver.name(), "queues": queues }));
        return Ok(());
    }
    let mut rows = vec![[
        "queue".to_owned(),
        "priority".to_owned(),
        "waiting".to_owned(),
        "delayed".to_owned(),
        "in flight".to_owned(),
        "dead".to_owned(),
        "latency".to_owned(),
    ]];
    for queue in &stats {
        rows.push([
            queue.name.clone(),
            queue.priority.to_string(),
            queue.waiting.to_string(),
            queue.delayed.to_string(),
            queue.in_flight.to_string(),
            queue.dead.to_string(),
            latency(queue.latency),
        ]);
    }
    print!("{}", crate::table::render(&rows));
    Ok(())
}

fn latency(figure: Figure<Duration>) -> String {
    match figure {
        Figure::Exact(d) => format!("{:.1}s", d.as_secs_f64()),
        Figure::Approximate(d) => format!("~{:.1}s", d.as_secs_f64()),
        Figure::Unknown => "?".to_owned(),
    }
}

/// A figure as JSON: the number, `{"approximate": n}`, or `null` when unknown.
fn count(figure: Figure<u64>) -> Value {
    match figure {
        Figure::Exact(n) => json!(n),
        Figure::Approximate(n) => json!({ "approximate": n }),
        Figure::Unknown => Value::Null,
    }
}

fn to_json(queue: &QueueStats) -> Value {
    let latency = match queue.latency {
        Figure::Exact(d) => json!(d.as_secs_f64()),
        Figure::Approximate(d) => json!({ "approximate": d.as_secs_f64() }),
        Figure::Unknown => Value::Null,
    };
    json!({
        "name": queue.name,
        "priority": queue.priority,
        "waiting": count(queue.waiting),
        "delayed": count(queue.delayed),
        "in_flight": count(queue.in_flight),
        "dead": count(queue.dead),
        "latency_seconds": latency,
    })
}
