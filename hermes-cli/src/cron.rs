//! `hermes cron ls`: the cron entries the running workers' schedulers announce.

use std::collections::BTreeMap;

use hermes_core::workers::ScheduledEntry;
use hermes_core::{Driver, Error};
use serde_json::{Value, json};

use crate::Failure;
use crate::args::format_rfc3339;

/// An entry across the workers that run it: the newest announcement's form, the earliest next
/// tick, the latest previous one, and how many workers run it.
struct Merged {
    entry: ScheduledEntry,
    next: Option<f64>,
    previous: Option<f64>,
    workers: usize,
}

/// Prints the entries of every live worker's schedulers, by name, as a table or JSON.
pub(crate) async fn list(driver: &dyn Driver, json: bool) -> Result<(), Failure> {
    let listed = match crate::facet::workers(driver) {
        Ok(workers) => workers.list().await,
        Err(e) => Err(e),
    };
    let workers = match listed {
        Ok(workers) => workers,
        Err(e @ Error::Unsupported { .. }) => {
            return Err(Failure::failed(format!(
                "{e}, where the schedulers of workers announce their entries"
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let mut merged: BTreeMap<String, Merged> = BTreeMap::new();
    let mut newest_first = workers;
    newest_first.sort_by(|a, b| b.announced.total_cmp(&a.announced));
    for worker in &newest_first {
        for entry in &worker.schedules {
            let slot = merged.entry(entry.name.clone()).or_insert_with(|| Merged {
                entry: entry.clone(),
                next: None,
                previous: None,
                workers: 0,
            });
            slot.workers += 1;
            slot.next = earliest(slot.next, entry.next);
            slot.previous = latest(slot.previous, entry.previous);
        }
    }
    if json {
        let list: Vec<Value> = merged.values().map(to_json).collect();
        println!("{}", Value::Array(list));
        return Ok(());
    }
    if merged.is_empty() {
        println!("no running worker announces a schedule");
        return Ok(());
    }
    let mut rows = vec![
        [
            "entry", "schedule", "zone", "type", "priority", "next", "previous", "workers",
        ]
        .map(str::to_owned),
    ];
    for m in merged.values() {
        rows.push([
            m.entry.name.clone(),
            m.entry.expression.clone(),
            m.entry.zone.clone(),
            m.entry.message_type.clone(),
            m.entry.priority.to_string(),
            time(m.next),
            time(m.previous),
            m.workers.to_string(),
        ]);
    }
    print!("{}", crate::table::render(&rows));
    Ok(())
}

fn earliest(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn latest(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn time(at: Option<f64>) -> String {
    at.map_or_else(
        || "-".to_owned(),
        |at| format_rfc3339(hermes_core::time::from_unix(at)),
    )
}

fn to_json(m: &Merged) -> Value {
    json!({
        "name": m.entry.name,
        "schedule": m.entry.expression,
        "zone": m.entry.zone,
        "type": m.entry.message_type,
        "priority": m.entry.priority,
        "next": m.next,
        "previous": m.previous,
        "workers": m.workers,
    })
}
