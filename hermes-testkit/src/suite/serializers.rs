//! Serializers other than Hermes' JSON (a sealing one, say): what is on the queue is what the
//! harness's serializer writes, unreadable when it hides payloads; what it refuses is
//! quarantined; and the scenarios that carry payloads pass through it ([`serializer_suite!`]).
//!
//! [`serializer_suite!`]: crate::serializer_suite

use std::sync::Arc;
use std::time::Duration;

use hermes_core::{DEFAULT_PRIORITY, Error, JsonSerializer, Message, Serializer, async_trait};
use serde_json::json;

use super::support::{PATIENCE, expect_each_quarantined, open, send};
use super::{Harness, Outcome};

/// A payload a hiding serializer must not leave readable.
const SECRET: &str = "s3cret-payload-4711";

/// Runs another harness's drivers with a serializer of the test's choice (the drivers'
/// `with_serializer`, through [`Harness::open_with`]).
#[derive(Debug)]
pub struct SerializedHarness<H> {
    inner: H,
    serializer: Arc<dyn Serializer>,
    hides_payloads: bool,
    refused: Option<Vec<u8>>,
}

impl<H: Harness> SerializedHarness<H> {
    /// `inner`'s drivers with a [`SealingSerializer`](hermes_seal::SealingSerializer) under a
    /// fresh key, compressing payloads over 1 KiB; a message sealed with a key it does not
    /// hold is the input it refuses.
    pub fn sealing(inner: H) -> Self {
        use hermes_seal::{SealKey, SealKeys, SealingSerializer};

        let sealing = |id: &str| {
            SealingSerializer::new(SealKeys::new(SealKey::generate(id).expect("a key id")))
        };
        let stranger = Message::builder("sealed")
            .payload(&json!({ "secret": SECRET }))
            .build()
            .expect("a message");
        let refused = sealing("stranger").serialize(&stranger).expect("sealing");
        SerializedHarness::new(inner, sealing("suite").compress_over(1024))
            .hiding_payloads()
            .refusing(refused)
    }

    /// `inner`'s drivers, encoding with `serializer`.
    pub fn new(inner: H, serializer: impl Serializer) -> Self {
        SerializedHarness {
            inner,
            serializer: Arc::new(serializer),
            hides_payloads: false,
            refused: None,
        }
    }

    /// The serializer keeps payloads unreadable on the queue: the scenarios check it.
    #[must_use]
    pub fn hiding_payloads(mut self) -> Self {
        self.hides_payloads = true;
        self
    }

    /// `bytes` look like a message, and the serializer refuses them: the scenarios check
    /// that they are quarantined.
    #[must_use]
    pub fn refusing(mut self, bytes: Vec<u8>) -> Self {
        self.refused = Some(bytes);
        self
    }
}

#[async_trait]
impl<H: Harness> Harness for SerializedHarness<H> {
    type Driver = H::Driver;

    async fn available(&self) -> Result<(), String> {
        self.inner.available().await
    }

    async fn open(&self, queue: &str) -> Result<Self::Driver, Error> {
        self.inner.open_with(queue, self.serializer.clone()).await
    }

    async fn open_with(
        &self,
        queue: &str,
        serializer: Arc<dyn Serializer>,
    ) -> Result<Self::Driver, Error> {
        self.inner.open_with(queue, serializer).await
    }

    fn serializer(&self) -> Option<Arc<dyn Serializer>> {
        Some(self.serializer.clone())
    }

    fn hides_payloads(&self) -> bool {
        self.hides_payloads
    }

    fn refused_input(&self) -> Option<Vec<u8>> {
        self.refused.clone()
    }

    async fn push_raw(&self, queue: &str, bytes: &[u8]) -> Result<(), Error> {
        self.inner.push_raw(queue, bytes).await
    }

    async fn pull_raw(&self, queue: &str) -> Result<Option<Vec<u8>>, Error> {
        self.inner.pull_raw(queue).await
    }

    fn carries_raw(&self, bytes: &[u8]) -> bool {
        self.inner.carries_raw(bytes)
    }

    async fn quarantined(&self, queue: &str) -> Result<usize, Error> {
        self.inner.quarantined(queue).await
    }

    fn visibility_timeout(&self) -> Duration {
        self.inner.visibility_timeout()
    }

    fn scale(&self) -> f64 {
        self.inner.scale()
    }

    async fn cleanup(&self, queue: &str) {
        self.inner.cleanup(queue).await;
    }

    /// `None`: a serializer may hold what another process cannot rebuild (a sealing key
    /// generated here), so the workers stay in this process.
    fn environment_of_copies(&self) -> Option<Vec<(String, String)>> {
        None
    }
}

/// A message sent through the driver is on the queue as the harness's serializer writes it
/// (Hermes' JSON unless the harness says otherwise): those bytes decode with it into the
/// message sent, and hold no trace of the payload when the serializer hides payloads.
pub async fn the_queue_holds_what_the_serializer_writes<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let sent = Message::builder("serialized")
        .payload(&json!({ "secret": SECRET, "n": 1 }))
        .build()
        .unwrap();
    send(&driver, &sent, DEFAULT_PRIORITY).await;
    let mut raw = None;
    let started = std::time::Instant::now();
    while raw.is_none() && started.elapsed() < PATIENCE {
        raw = h.pull_raw(queue).await.expect("pulling raw bytes");
    }
    let raw = raw.expect("the message on the queue");
    let serializer = h
        .serializer()
        .unwrap_or_else(|| Arc::new(JsonSerializer) as Arc<dyn Serializer>);
    let decoded = serializer
        .deserialize(&raw)
        .expect("the bytes on the queue decode with the harness's serializer");
    assert_eq!(decoded, sent, "the bytes on the queue hold another message");
    if h.hides_payloads() {
        let text = String::from_utf8_lossy(&raw);
        assert!(
            !text.contains(SECRET),
            "the payload is readable on the queue"
        );
        let outer = JsonSerializer
            .deserialize(&raw)
            .expect("the message around a hidden payload is Hermes' JSON");
        assert_eq!(outer.id(), sent.id());
        assert_eq!(outer.message_type(), sent.message_type());
    }
    Outcome::Passed
}

/// Bytes the harness's serializer refuses (a payload sealed with a key it does not hold, say)
/// reach no handler: they are reported undecodable and quarantined, and the good message
/// behind them is delivered.
pub async fn input_the_serializer_refuses_is_quarantined<H: Harness>(
    h: &H,
    queue: &str,
) -> Outcome {
    let Some(refused) = h.refused_input() else {
        return Outcome::Skipped("the harness names no input its serializer refuses".into());
    };
    if !h.carries_raw(&refused) {
        return Outcome::Skipped("the backend cannot carry the refused bytes unchanged".into());
    }
    expect_each_quarantined(h, queue, &[&refused]).await;
    Outcome::Passed
}

/// Generates, for the [`SerializedHarness`] built by `$harness`, one `#[test]` per scenario
/// that carries payloads (round trips, delays, batches, retries, dead letters and their
/// replay) and per serializer scenario, each through the harness's serializer.
///
/// ```
/// mod json_again {
///     use hermes_testkit::suite::SerializedHarness;
///
///     hermes_testkit::serializer_suite!(SerializedHarness::new(
///         hermes_testkit::MemoryHarness::new(),
///         hermes_core::JsonSerializer,
///     ));
/// }
/// ```
#[macro_export]
macro_rules! serializer_suite {
    ($harness:expr) => {
        $crate::conformance_suite!(@tests $harness;
            round_trip_keeps_every_field,
            large_payload_round_trip,
            unicode_payload_round_trip,
            delayed_message_waits_until_due,
            send_batch_delivers_each,
            failing_handler_sends_one_delayed_copy,
            dispatcher_handles_emitted_messages,
            failed_messages_become_dead_letters_and_replay,
            the_queue_holds_what_the_serializer_writes,
            input_the_serializer_refuses_is_quarantined,
        );
    };
}
