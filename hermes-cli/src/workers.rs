//! `hermes workers`: the running workers, as they announce themselves.

use hermes_core::inspect::{Figure, QueueStats};
use hermes_core::workers::WorkerInfo;
use hermes_core::{Driver, Error};
use serde_json::{Value, json};

use crate::Failure;
use crate::args::format_rfc3339;

/// Prints the workers whose announcement holds, as a table or JSON. A backend that lists no
/// workers but counts each queue's consumers (RabbitMQ) gets those counts in the table instead.
pub(crate) async fn list(driver: &dyn Driver, json: bool) -> Result<(), Failure> {
    let listed = match crate::facet::workers(driver) {
        Ok(workers) => workers.list().await,
        Err(e) => Err(e),
    };
    let workers = match listed {
        Ok(workers) => workers,
        Err(e @ Error::Unsupported { .. }) if !json => {
            let stats = crate::facet::inspect(driver)?.stats().await?;
            if stats.iter().all(|q| q.consumers == Figure::Unknown) {
                return Err(e.into());
            }
            println!(
                "{} lists no workers; the broker counts each queue's consumers:",
                driver.name()
            );
            print!("{}", consumer_table(&stats));
            return Ok(());
        }
        Err(e @ Error::Unsupported { .. }) => {
            return Err(Failure::failed(format!(
                "{e}; `hermes stats --json` gives each queue's consumers where the broker counts them"
            )));
        }
        Err(e) => return Err(e.into()),
    };
    if json {
        let list: Vec<Value> = workers.iter().map(to_json).collect();
        println!("{}", Value::Array(list));
        return Ok(());
    }
    let mut rows = vec![[
        "worker".to_owned(),
        "host".to_owned(),
        "pid".to_owned(),
        "started".to_owned(),
        "busy".to_owned(),
        "handled".to_owned(),
        "failed".to_owned(),
        "priorities".to_owned(),
        "version".to_owned(),
        "running".to_owned(),
    ]];
    for w in &workers {
        let priorities = if w.priorities.is_empty() {
            "all".to_owned()
        } else {
            w.priorities
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let running = w
            .running
            .iter()
            .map(hermes_dashboard::view::running)
            .collect::<Vec<_>>()
            .join(", ");
        rows.push([
            w.id.clone(),
            w.host.clone(),
            w.pid.to_string(),
            format_rfc3339(hermes_core::time::from_unix(w.started)),
            format!("{}/{}", w.busy, w.concurrency),
            w.handled.to_string(),
            w.failed.to_string(),
            priorities,
            w.version.clone(),
            if running.is_empty() {
                "-".to_owned()
            } else {
                running
            },
        ]);
    }
    print!("{}", crate::table::render(&rows));
    Ok(())
}

/// Each queue's consumers, as a table.
pub(crate) fn consumer_table(stats: &[QueueStats]) -> String {
    let mut rows = vec![[
        "queue".to_owned(),
        "priority".to_owned(),
        "consumers".to_owned(),
    ]];
    for q in stats {
        rows.push([
            q.name.clone(),
            q.priority.to_string(),
            q.consumers.to_string(),
        ]);
    }
    crate::table::render(&rows)
}

fn to_json(w: &WorkerInfo) -> Value {
    json!({
        "id": w.id,
        "host": w.host,
        "pid": w.pid,
        "started": w.started,
        "concurrency": w.concurrency,
        "busy": w.busy,
        "handled": w.handled,
        "failed": w.failed,
        "announced": w.announced,
        "priorities": w.priorities,
        "version": w.version,
        "running": w.running.iter().map(|r| json!({"id": r.id, "type": r.message_type, "since": r.since})).collect::<Vec<_>>(),
        "expires": w.expires,
    })
}
