//! `hermes stats`: every queue's figures, as a table or JSON.

use std::time::Duration;

use hermes_core::Driver;
use hermes_core::inspect::QueueStats;
use hermes_dashboard::view::{latency, queue_json};
use serde_json::{Value, json};

use crate::Failure;

/// Prints the figures of every queue.
pub(crate) async fn stats(driver: &dyn Driver, json: bool) -> Result<(), Failure> {
    let stats = crate::facet::inspect(driver)?.stats().await?;
    let paused = paused(driver).await?;
    if json {
        let queues: Vec<Value> = stats.iter().map(queue_json).collect();
        println!(
            "{}",
            json!({ "driver": driver.name(), "queues": queues, "paused": paused })
        );
        return Ok(());
    }
    print_table(&stats);
    print_paused(&paused);
    Ok(())
}

/// What is paused, as `priority:<n>` and `type:<name>`; none on a backend without controls.
async fn paused(driver: &dyn Driver) -> Result<Vec<String>, Failure> {
    Ok(match driver.controls() {
        Some(controls) => controls
            .paused()
            .await?
            .iter()
            .map(ToString::to_string)
            .collect(),
        None => Vec::new(),
    })
}

fn print_paused(paused: &[String]) {
    if !paused.is_empty() {
        println!("paused: {}", paused.join(", "));
    }
}

/// Prints the figures every `every` until interrupted (Ctrl-C or SIGTERM, exit status 0): a
/// table under the time, or one JSON object per line. A refresh that takes longer than
/// `timeout` fails the command.
pub(crate) async fn watch(
    driver: &dyn Driver,
    json: bool,
    every: Duration,
    timeout: Duration,
) -> Result<(), Failure> {
    let inspect = crate::facet::inspect(driver)?;
    let stop = hermes_core::SignalShutdown::install()?;
    let stopped = hermes_core::Shutdown::token(&stop).unwrap_or_default();
    loop {
        let read = async { Ok::<_, Failure>((inspect.stats().await?, paused(driver).await?)) };
        let (stats, paused) = tokio::time::timeout(timeout, read).await.map_err(|_| {
            Failure::failed(format!(
                "stats: no answer within {}",
                crate::table::seconds(timeout)
            ))
        })??;
        let now = crate::args::format_rfc3339(std::time::SystemTime::now());
        if json {
            let queues: Vec<Value> = stats.iter().map(queue_json).collect();
            println!(
                "{}",
                json!({ "driver": driver.name(), "at": now, "queues": queues, "paused": paused })
            );
        } else {
            println!("{now}");
            print_table(&stats);
            print_paused(&paused);
            println!();
        }
        tokio::select! {
            () = stopped.cancelled() => return Ok(()),
            () = tokio::time::sleep(every) => {}
        }
    }
}

fn print_table(stats: &[QueueStats]) {
    let mut rows = vec![[
        "queue".to_owned(),
        "priority".to_owned(),
        "waiting".to_owned(),
        "delayed".to_owned(),
        "in flight".to_owned(),
        "dead".to_owned(),
        "latency".to_owned(),
    ]];
    for queue in stats {
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
}
