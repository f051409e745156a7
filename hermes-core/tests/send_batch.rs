//! `Driver::send_batch` (its default and its forwarding through `Arc` and `Box`) and
//! `Emitter::emit_batch`, on the in-memory driver.

use std::sync::Arc;
use std::time::Duration;

use hermes_core::{DEFAULT_PRIORITY, Driver, Emitter, Error, Message};
use hermes_testkit::{HookedDriver, LogCapture, MemoryDriver, MemoryOptions, Op};

/// The memory driver, counting the calls of `send` and of its own `send_batch` (one call for
/// the whole batch).
fn counted(inner: &MemoryDriver) -> Arc<HookedDriver<MemoryDriver>> {
    Arc::new(HookedDriver::new(inner.reopen()).named("counting"))
}

/// (sends, batch calls).
fn calls(driver: &HookedDriver<MemoryDriver>) -> (usize, usize) {
    (driver.calls(Op::Send), driver.calls(Op::SendBatch))
}

fn batch(prefix: &str, n: usize) -> Vec<Message> {
    (0..n)
        .map(|i| {
            Message::builder("t")
                .id(format!("{prefix}-{i}"))
                .build()
                .unwrap()
        })
        .collect()
}

async fn drain(driver: &impl Driver) -> Vec<String> {
    let mut ids = Vec::new();
    while let Some(d) = driver.receive(&[], Duration::ZERO).await.unwrap() {
        ids.push(d.message().id().to_owned());
        driver.ack(&d).await.unwrap();
    }
    ids
}

#[tokio::test]
async fn the_default_sends_each_in_order() {
    // A subscriber of its own: a log line first met on a thread without one could stay
    // switched off for the tests that read the lines.
    let (_logs, _guard) = LogCapture::install();
    let memory = MemoryDriver::new();
    let sent = batch("d", 5);
    memory.send_batch(&sent, DEFAULT_PRIORITY).await.unwrap();
    memory.send_batch(&[], DEFAULT_PRIORITY).await.unwrap();
    let ids: Vec<_> = sent.iter().map(|m| m.id().to_owned()).collect();
    assert_eq!(drain(&memory).await, ids);
}

#[tokio::test]
async fn the_default_stops_at_the_first_error() {
    // A subscriber of its own: a log line first met on a thread without one could stay
    // switched off for the tests that read the lines.
    let (_logs, _guard) = LogCapture::install();
    let memory = MemoryDriver::new();
    let sent = batch("e", 3);
    let err = memory.send_batch(&sent, 5).await.unwrap_err();
    assert!(matches!(err, Error::UnknownPriority(5)), "{err}");
    assert!(memory.is_empty());

    // The memory driver keeps the default; with a payload limit, its `send` refuses e-1.
    let mut options = MemoryOptions::default();
    options.max_payload = Some(200);
    let limited = MemoryDriver::with_options(options).unwrap();
    let mut sent = sent;
    sent[1] = Message::builder("t")
        .id("e-1")
        .payload(&serde_json::json!({ "large": "x".repeat(200) }))
        .build()
        .unwrap();
    let driver: Arc<dyn Driver> = Arc::new(limited.reopen());
    let err = driver
        .send_batch(&sent, DEFAULT_PRIORITY)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PayloadTooLarge { .. }), "{err}");
    assert_eq!(
        drain(&limited).await,
        ["e-0"],
        "sent up to the failure, not after"
    );
}

#[tokio::test]
async fn an_override_is_kept_behind_arc_and_box() {
    // Captured on this thread: an emitter logging without a subscriber while another test
    // installs one could leave the log line's callsite disabled for that test.
    let (logs, _guard) = LogCapture::install();
    let memory = MemoryDriver::new();
    let counting = counted(&memory);
    let as_dyn: Arc<dyn Driver> = counting.clone();
    as_dyn
        .send_batch(&batch("a", 3), DEFAULT_PRIORITY)
        .await
        .unwrap();
    let boxed: Box<dyn Driver> = Box::new(counting.clone());
    boxed
        .send_batch(&batch("b", 2), DEFAULT_PRIORITY)
        .await
        .unwrap();
    Emitter::from_arc(Arc::new(as_dyn.clone()))
        .emit_batch(&batch("c", 4), DEFAULT_PRIORITY)
        .await
        .unwrap();
    assert_eq!(calls(&counting), (0, 3), "(sends, batch calls)");
    assert_eq!(logs.count_starting_with("INFO Emitter send message #c-"), 4);
    assert_eq!(drain(&memory).await.len(), 9);
}

#[tokio::test]
async fn emit_batch_logs_each_message_after_the_driver_has_them() {
    let (logs, _guard) = LogCapture::install();
    let memory = MemoryDriver::new();
    let counting = counted(&memory);
    let emitter = Emitter::from_arc(counting.clone());

    emitter.emit_batch(&[], DEFAULT_PRIORITY).await.unwrap();
    assert_eq!(
        calls(&counting),
        (0, 0),
        "an empty batch does not reach the driver"
    );

    emitter
        .emit_batch(&batch("l", 3), DEFAULT_PRIORITY)
        .await
        .unwrap();
    emitter
        .emit(&batch("one", 1)[0], DEFAULT_PRIORITY)
        .await
        .unwrap();
    assert_eq!(
        logs.lines(),
        [
            "INFO Emitter send message #l-0 to driver counting",
            "INFO Emitter send message #l-1 to driver counting",
            "INFO Emitter send message #l-2 to driver counting",
            "INFO Emitter send message #one-0 to driver counting",
        ]
    );

    let err = emitter.emit_batch(&batch("x", 2), 5).await.unwrap_err();
    assert!(matches!(err, Error::UnknownPriority(5)), "{err}");
    assert_eq!(logs.lines().len(), 4, "a failed batch logs nothing");
    assert_eq!(drain(&memory).await.len(), 4);
}
