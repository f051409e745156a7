//! A broker that takes the TCP connection and then never answers (a frozen or half-started
//! server): every call fails within its bound with a temporary error instead of hanging, and a
//! dispatcher on it can still be shut down.

use std::time::{Duration, Instant};

use hermes_core::driver::CALL_TIMEOUT;
use hermes_core::inspect::{QueueState, Replay};
use hermes_core::{DEFAULT_PRIORITY, Dispatcher, Driver, Error, Message};
use hermes_rabbitmq::{RabbitMqDriver, RabbitMqOptions};
use hermes_testkit::silent_port;

fn bound() -> Duration {
    CALL_TIMEOUT + Duration::from_secs(2)
}

async fn within<T>(what: &str, call: impl Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let result = tokio::time::timeout(bound() * 3, call)
        .await
        .unwrap_or_else(|_| panic!("{what} hung on a broker that never answers"));
    let took = started.elapsed();
    assert!(took <= bound(), "{what} took {took:?}");
    (result, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_to_a_silent_broker_fail_within_their_bound() {
    let url = format!("amqp://guest:guest@127.0.0.1:{}/%2f", silent_port());
    let driver = RabbitMqDriver::new(&url, "silent", RabbitMqOptions::default()).unwrap();
    let message = Message::builder("job").build().unwrap();

    let (sent, _) = within("send", driver.send(&message, DEFAULT_PRIORITY)).await;
    let error = sent.expect_err("nothing was sent");
    assert!(error.is_temporary(), "{error:?}");
    assert!(matches!(error, Error::Connection { .. }), "{error:?}");
    assert!(!error.to_string().contains("guest:guest"), "{error}");

    let (received, _) = within("receive", driver.receive(&[], Duration::from_secs(1))).await;
    assert!(received.expect_err("nothing was received").is_temporary());
    let (flushed, _) = within("flush", driver.flush()).await;
    flushed.unwrap();

    let (stats, _) = within("stats", driver.inspect().unwrap().stats()).await;
    assert!(stats.expect_err("no stats").is_temporary());
    let (letters, _) = within(
        "dead letters",
        driver.dead_letters().unwrap().list(DEFAULT_PRIORITY, 10),
    )
    .await;
    assert!(letters.expect_err("no dead letters").is_temporary());
    let (replayed, _) = within(
        "replay",
        driver
            .dead_letters()
            .unwrap()
            .replay(DEFAULT_PRIORITY, &Replay::all()),
    )
    .await;
    assert!(replayed.expect_err("no replay").is_temporary());
    let (purged, _) = within(
        "purge",
        driver
            .inspect()
            .unwrap()
            .purge(DEFAULT_PRIORITY, QueueState::Waiting),
    )
    .await;
    let error = purged.expect_err("no purge");
    assert!(error.is_temporary(), "{error:?}");
    assert!(!error.to_string().contains("guest:guest"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_on_a_silent_broker_still_shuts_down() {
    let url = format!("amqp://guest:guest@127.0.0.1:{}/%2f", silent_port());
    let driver = RabbitMqDriver::new(&url, "silent", RabbitMqOptions::default()).unwrap();
    let dispatcher = Dispatcher::new(driver);
    let token = dispatcher.cancellation_token();
    let running = tokio::spawn(async move { dispatcher.handle(&[]).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    token.cancel();
    let (result, _) = within("the shutdown", running).await;
    result.unwrap().unwrap();
}
