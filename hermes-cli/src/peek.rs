//! `hermes peek` and `hermes purge`: the messages of one state of a queue.

use hermes_core::inspect::QueueState;
use hermes_core::{Driver, Priority};
use serde_json::Value;

use crate::Failure;

/// Prints up to `limit` messages of `state` without taking them.
pub(crate) async fn peek(
    driver: &dyn Driver,
    priority: Priority,
    state: QueueState,
    limit: usize,
    json: bool,
) -> Result<(), Failure> {
    let messages = crate::facet::browse(driver)?
        .peek(priority, state, limit)
        .await?;
    if json {
        let list: Vec<Value> = messages
            .iter()
            .map(hermes_dashboard::view::message_json)
            .collect();
        println!("{}", Value::Array(list));
        return Ok(());
    }
    let mut rows = vec![[
        "id".to_owned(),
        "type".to_owned(),
        "retries".to_owned(),
        "due".to_owned(),
    ]];
    for m in &messages {
        rows.push([
            m.id().to_owned(),
            m.message_type().to_owned(),
            m.retries().to_string(),
            format!("{:.3}", m.due()),
        ]);
    }
    print!("{}", crate::table::render(&rows));
    Ok(())
}

/// Removes every message of `state`, when `yes`.
pub(crate) async fn purge(
    driver: &dyn Driver,
    priority: Priority,
    state: QueueState,
    yes: bool,
) -> Result<(), Failure> {
    if !yes {
        return Err(Failure::usage(format!(
            "purging removes every {state} message of the queue: add --yes to do it"
        )));
    }
    let inspect = crate::facet::inspect(driver)?;
    let spinner = crate::progress::spinner(format!("purging the {state} messages"));
    let purged = inspect.purge(priority, state).await;
    spinner.finish_and_clear();
    match purged? {
        Some(n) => println!("purged {n} {state} messages"),
        None => println!("purged the {state} messages"),
    }
    Ok(())
}
