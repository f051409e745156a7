//! `hermes workers`: the running workers, as they announce themselves.

use hermes_core::{Driver, WorkerInfo};
use serde_json::{Value, json};

use crate::Failure;
use crate::args::format_rfc3339;

/// Prints the workers whose announcement holds, as a table or JSON.
pub(crate) async fn list(driver: &dyn Driver, json: bool) -> Result<(), Failure> {
    let workers = driver.workers().await?;
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
            .map(|r| format!("{} ({})", r.id, r.message_type))
            .collect::<Vec<_>>()
            .join(", ");
        rows.push([
            w.id.clone(),
            w.host.clone(),
            w.pid.to_string(),
            format_rfc3339(hermes_core::time::from_unix(w.started)),
            format!("{}/{}", w.busy, w.concurrency),
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

fn to_json(w: &WorkerInfo) -> Value {
    json!({
        "id": w.id,
        "host": w.host,
        "pid": w.pid,
        "started": w.started,
        "concurrency": w.concurrency,
        "busy": w.busy,
        "priorities": w.priorities,
        "version": w.version,
        "running": w.running.iter().map(|r| json!({"id": r.id, "type": r.message_type, "since": r.since})).collect::<Vec<_>>(),
        "expires": w.expires,
    })
}
