//! `hermes cron ls`: the cron entries the running workers' schedulers announce; `hermes cron run
//! NAME`: one entry's message, now.

use hermes_core::{Driver, Error};
use hermes_dashboard::view::{AnnouncedEntry, cron_entries};
use serde_json::{Value, json};

use crate::Failure;
use crate::args::format_rfc3339;

/// The entries every live worker's schedulers announce, merged by name.
async fn announced(driver: &dyn Driver) -> Result<Vec<AnnouncedEntry>, Failure> {
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
    Ok(cron_entries(&workers))
}

/// Emits the message of the entry called `name` now, to its priority, and prints its id.
pub(crate) async fn run(driver: &dyn Driver, name: &str) -> Result<(), Failure> {
    let entries = announced(driver).await?;
    let Some(found) = entries.iter().find(|e| e.entry.name == name) else {
        return Err(Failure::failed(format!(
            "no running worker announces a cron entry called {name:?}"
        )));
    };
    let message = found.entry.message_now()?;
    driver.send(&message, found.entry.priority).await?;
    println!(
        "emitted {} ({}) to priority {}",
        message.id(),
        found.entry.message_type,
        found.entry.priority
    );
    Ok(())
}

/// Prints the entries of every live worker's schedulers, by name, as a table or JSON.
pub(crate) async fn list(driver: &dyn Driver, json: bool) -> Result<(), Failure> {
    let merged = announced(driver).await?;
    if json {
        let list: Vec<Value> = merged.iter().map(to_json).collect();
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
    for m in &merged {
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

fn time(at: Option<f64>) -> String {
    at.map_or_else(
        || "-".to_owned(),
        |at| format_rfc3339(hermes_core::time::from_unix(at)),
    )
}

fn to_json(m: &AnnouncedEntry) -> Value {
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
