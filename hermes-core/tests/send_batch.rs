//! `Driver::send_batch` (its default and its forwarding through `Arc` and `Box`) and
//! `Emitter::emit_batch`, on the in-memory driver.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hermes_core::{
    Capabilities, DEFAULT_PRIORITY, Delivery, Driver, Emitter, Error, Message, Priority,
    async_trait,
};
use hermes_testkit::{LogCapture, MemoryDriver};

/// The memory driver, counting the calls of `send` and of its own `send_batch` (one call for
/// the whole batch).
#[derive(Debug)]
struct Counting {
    inner: MemoryDriver,
    sends: AtomicUsize,
    batch_calls: AtomicUsize,
}

impl Counting {
    fn new(inner: &MemoryDriver) -> Self {
        Counting {
            inner: inner.reopen(),
            sends: AtomicUsize::new(0),
            batch_calls: AtomicUsize::new(0),
        }
    }

    /// (sends, batch calls).
    fn calls(&self) -> (usize, usize) {
        (
            self.sends.load(Ordering::SeqCst),
            self.batch_calls.load(Ordering::SeqCst),
        )
    }
}

#[async_trait]
impl Driver for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        self.inner.setup_priority_queue(name, priority)
    }
    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        self.sends.fetch_add(1, Ordering::SeqCst);
        self.inner.send(message, priority).await
    }
    async fn send_batch(&self, messages: &[Message], priority: Priority) -> Result<(), Error> {
        self.batch_calls.fetch_add(1, Ordering::SeqCst);
        self.inner.send_batch(messages, priority).await
    }
    async fn receive(&self, p: &[Priority], wait: Duration) -> Result<Option<Delivery>, Error> {
        self.inner.receive(p, wait).await
    }
    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.inner.ack(delivery).await
    }
    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.inner.nack(delivery).await
    }
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
    let memory = MemoryDriver::new();
    let sent = batch("d", 5);
    memory.send_batch(&sent, DEFAULT_PRIORITY).await.unwrap();
    memory.send_batch(&[], DEFAULT_PRIORITY).await.unwrap();
    let ids: Vec<_> = sent.iter().map(|m| m.id().to_owned()).collect();
    assert_eq!(drain(&memory).await, ids);
}

#[tokio::test]
async fn the_default_stops_at_the_first_error() {
    let memory = MemoryDriver::new();
    let sent = batch("e", 3);
    let err = memory.send_batch(&sent, 5).await.unwrap_err();
    assert!(matches!(err, Error::UnknownPriority(5)), "{err}");
    assert!(memory.is_empty());

    let failing = Arc::new(FailsOn {
        inner: memory.reopen(),
        id: "e-1",
    });
    let driver: Arc<dyn Driver> = failing.clone();
    let err = driver
        .send_batch(&sent, DEFAULT_PRIORITY)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Driver { .. }), "{err}");
    assert_eq!(
        drain(&memory).await,
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
    let counting = Arc::new(Counting::new(&memory));
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
    assert_eq!(counting.calls(), (0, 3), "(sends, batch calls)");
    assert_eq!(logs.count_starting_with("INFO Emitter send message #c-"), 4);
    assert_eq!(drain(&memory).await.len(), 9);
}

#[tokio::test]
async fn emit_batch_logs_each_message_after_the_driver_has_them() {
    let (logs, _guard) = LogCapture::install();
    let memory = MemoryDriver::new();
    let counting = Arc::new(Counting::new(&memory));
    let emitter = Emitter::from_arc(counting.clone());

    emitter.emit_batch(&[], DEFAULT_PRIORITY).await.unwrap();
    assert_eq!(
        counting.calls(),
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

/// The memory driver whose `send` fails for one id; `send_batch` is the trait's default.
#[derive(Debug)]
struct FailsOn {
    inner: MemoryDriver,
    id: &'static str,
}

#[async_trait]
impl Driver for FailsOn {
    fn name(&self) -> &'static str {
        "fails-on"
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        self.inner.setup_priority_queue(name, priority)
    }
    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        if message.id() == self.id {
            return Err(Error::driver("fails-on", "deliberate failure", false));
        }
        self.inner.send(message, priority).await
    }
    async fn receive(&self, p: &[Priority], wait: Duration) -> Result<Option<Delivery>, Error> {
        self.inner.receive(p, wait).await
    }
    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.inner.ack(delivery).await
    }
    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.inner.nack(delivery).await
    }
}
