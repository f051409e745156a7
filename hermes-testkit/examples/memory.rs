//! A worker on the in-memory driver: emits a few jobs (one urgent, one delayed, one that fails
//! once and is retried) and handles them, printing what happens.
//!
//! `cargo run -p hermes-testkit --example memory`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, Driver, EchoHandler, Emitter, HandlerError, Message, RetryPolicy,
    SignalShutdown, handler_fn,
};
use hermes_testkit::MemoryDriver;
use serde_json::json;

const HIGH: i32 = DEFAULT_PRIORITY + 10;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_target(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();

    let driver = Arc::new(MemoryDriver::new());
    driver.setup_priority_queue("hermes_high", HIGH)?;

    let emitter = Emitter::from_arc(driver.clone());
    let report = |name: &str| {
        Message::builder("report.export")
            .payload(&json!({ "report": name }))
            .build()
    };
    emitter.emit(&report("sales")?, DEFAULT_PRIORITY).await?;
    emitter.emit(&report("urgent")?, HIGH).await?;
    let delayed = Message::builder("report.export")
        .payload(&json!({ "report": "nightly" }))
        .delay(Duration::from_secs(2))
        .build()?;
    emitter.emit(&delayed, DEFAULT_PRIORITY).await?;
    emitter
        .emit(&Message::builder("flaky").build()?, DEFAULT_PRIORITY)
        .await?;

    let failed_once = Arc::new(AtomicBool::new(false));
    let mut dispatcher = Dispatcher::from_arc(driver.clone())
        .with_shutdown(SignalShutdown::install()?)
        .max_items(5);
    dispatcher.register_handler("report.export", Arc::new(EchoHandler::new()));
    dispatcher.register_handler(
        "flaky",
        Arc::new(
            handler_fn(move |m: Message| {
                let failed_once = failed_once.clone();
                async move {
                    if !failed_once.swap(true, Ordering::SeqCst) {
                        return Err(HandlerError::msg("the printer is on fire"));
                    }
                    println!("flaky job #{} succeeded on retry {}", m.id(), m.retries());
                    Ok(true)
                }
            })
            .named("FlakyHandler")
            .with_retry(RetryPolicy::fixed(Duration::from_secs(1), 3)),
        ),
    );
    dispatcher.handle(&[]).await?;
    println!(
        "done: 4 jobs emitted, 5 deliveries handled (one retry), {} left on the queue",
        driver.len()
    );
    Ok(())
}
