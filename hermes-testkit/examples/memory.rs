//! A worker on the in-memory driver: emits a few jobs (one urgent, one delayed, one that fails
//! once and is retried) and handles them, printing what happens.
//!
//! `cargo run -p hermes-testkit --example memory`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, Driver, Emitter, Job, JobContext, RetryPolicy, SignalShutdown,
};
use hermes_testkit::MemoryDriver;
use serde::{Deserialize, Serialize};

const HIGH: i32 = DEFAULT_PRIORITY + 10;

/// Export one report.
#[derive(Serialize, Deserialize)]
struct ExportReport {
    report: String,
}

impl Job for ExportReport {
    const TYPE: &'static str = "report.export";
}

/// Print something, on a printer that fails the first time.
#[derive(Serialize, Deserialize)]
struct Print {
    document: String,
}

impl Job for Print {
    const TYPE: &'static str = "print";
    fn retry_policy() -> Option<RetryPolicy> {
        Some(RetryPolicy::fixed(Duration::from_secs(1), 3))
    }
}

async fn export(job: ExportReport, ctx: JobContext) -> Result<(), std::io::Error> {
    println!("exported {} (priority {})", job.report, ctx.priority());
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_target(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();

    let driver = MemoryDriver::new();
    driver.setup_priority_queue("hermes_high", HIGH)?;

    let emitter = Emitter::new(driver.clone());
    let report = |name: &str| ExportReport {
        report: name.to_owned(),
    };
    emitter.emit_job(&report("sales")).await?;
    emitter.job(&report("urgent")).priority(HIGH).send().await?;
    emitter
        .job(&report("nightly"))
        .delay(Duration::from_secs(2))
        .send()
        .await?;
    emitter
        .emit_job(&Print {
            document: "invoice".into(),
        })
        .await?;

    let failed_once = Arc::new(AtomicBool::new(false));
    let mut dispatcher = Dispatcher::new(driver.clone())
        .with_shutdown(SignalShutdown::install()?)
        .max_items(5);
    dispatcher.register_job(export);
    dispatcher.register_job(move |job: Print, ctx: JobContext| {
        let failed_once = failed_once.clone();
        async move {
            if !failed_once.swap(true, Ordering::SeqCst) {
                return Err("the printer is on fire");
            }
            println!("printed {} on retry {}", job.document, ctx.retries());
            Ok(())
        }
    });
    dispatcher.handle(&[]).await?;
    println!(
        "done: 4 jobs emitted, 5 deliveries handled (one retry), {} left on the queue",
        driver.len()
    );
    Ok(())
}
