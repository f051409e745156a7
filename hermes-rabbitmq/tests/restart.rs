//! The broker restarts under a running worker and a running emitter: both wait for it, and
//! every message whose `send` returned is handled, on classic and on quorum queues. In a test
//! binary of its own, as the restart drops every connection to the broker; one restart at a
//! time.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{CLASSIC, QUORUM, RabbitHarness, rabbitmqctl};
use hermes_core::{DEFAULT_PRIORITY, Dispatcher, Driver, Message, handler_fn};
use hermes_testkit::suite::{Harness, available_or_skip, strict, unique_queue_name};

/// Taken by each test for its restart.
static RESTARTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_restart_loses_no_confirmed_message() {
    restart_under_load(&CLASSIC).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_restart_loses_no_confirmed_message_on_quorum_queues() {
    restart_under_load(&QUORUM).await;
}

async fn restart_under_load(harness: &RabbitHarness) {
    if !available_or_skip(strict(), "restart", harness.available().await) {
        return;
    }
    let _one_at_a_time = RESTARTS.lock().await;
    let queue = unique_queue_name("restart");
    let worker = harness.open(&queue).await.unwrap();
    let emitter = harness.open(&queue).await.unwrap();
    let handled: Arc<Mutex<HashSet<String>>> = Arc::default();
    let record = handled.clone();
    let mut dispatcher = Dispatcher::new(worker);
    dispatcher.register_handler(
        "job",
        Arc::new(handler_fn(move |m: Message| {
            let record = record.clone();
            async move {
                record.lock().unwrap().insert(m.id().to_owned());
                Ok(true)
            }
        })),
    );
    let token = dispatcher.cancellation_token();
    let running = tokio::spawn(async move { dispatcher.handle(&[]).await });

    let mut confirmed = HashSet::new();
    let mut refused = 0;
    for i in 0..60 {
        if i == 20 {
            let _ = rabbitmqctl(&["stop_app"]);
        }
        if i == 25 {
            let _ = rabbitmqctl(&["start_app"]);
            let _ = rabbitmqctl(&["await_startup"]);
        }
        let m = Message::builder("job")
            .payload(&serde_json::json!({"i": i}))
            .build()
            .unwrap();
        match emitter.send(&m, DEFAULT_PRIORITY).await {
            Ok(()) => {
                confirmed.insert(m.id().to_owned());
            }
            Err(e) => {
                assert!(e.is_temporary(), "{e}");
                refused += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(refused > 0, "the restart was noticed by the emitter");
    let give_up = Instant::now() + Duration::from_secs(60);
    while !confirmed.is_subset(&handled.lock().unwrap()) {
        assert!(
            Instant::now() < give_up,
            "some confirmed messages were not handled"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    token.cancel();
    running
        .await
        .unwrap()
        .expect("the worker waited for the broker instead of exiting");
    harness.cleanup(&queue).await;
}
