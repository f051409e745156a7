//! `hermes pause`, `resume`, `paused` and `cancel`: the backend's pauses and cancellations.

use std::sync::Arc;

use hermes_core::flow::PauseTarget;
use hermes_core::{Driver, Emitter};

use crate::Failure;

/// An emitter on `driver`, once it is known to keep pauses and cancellations.
fn emitter(driver: &Arc<dyn Driver>) -> Result<Emitter, Failure> {
    if driver.controls().is_none() {
        return Err(Failure::failed(format!(
            "the {} backend keeps no pauses or cancellations: give --store with the Redis, \
             PostgreSQL or directory URL its workers keep them in",
            driver.name()
        )));
    }
    Ok(Emitter::from_arc(driver.clone()))
}

/// Pauses `target`.
pub(crate) async fn pause(driver: &Arc<dyn Driver>, target: &PauseTarget) -> Result<(), Failure> {
    emitter(driver)?.pause(target).await?;
    println!("paused {target}");
    Ok(())
}

/// Resumes `target`.
pub(crate) async fn resume(driver: &Arc<dyn Driver>, target: &PauseTarget) -> Result<(), Failure> {
    if emitter(driver)?.resume(target).await? {
        println!("resumed {target}");
    } else {
        println!("{target} was not paused");
    }
    Ok(())
}

/// Lists what is paused.
pub(crate) async fn paused(driver: &Arc<dyn Driver>, json: bool) -> Result<(), Failure> {
    let paused = emitter(driver)?.paused().await?;
    let names: Vec<String> = paused.iter().map(ToString::to_string).collect();
    if json {
        println!("{}", serde_json::json!({ "paused": names }));
    } else if names.is_empty() {
        println!("nothing is paused");
    } else {
        for name in names {
            println!("{name}");
        }
    }
    Ok(())
}

/// Cancels each of `ids`, saying `by` (default: user@host) asked.
pub(crate) async fn cancel(
    driver: &Arc<dyn Driver>,
    ids: &[String],
    by: Option<&str>,
) -> Result<(), Failure> {
    let by = by.map_or_else(asker, str::to_owned);
    let emitter = emitter(driver)?;
    for id in ids {
        emitter.cancel(id, &by).await?;
        println!("cancelled #{id}");
    }
    Ok(())
}

/// `user@host`, as far as the environment tells.
fn asker() -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "someone".to_owned());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    format!("hermes cancel by {user}@{host}")
}
