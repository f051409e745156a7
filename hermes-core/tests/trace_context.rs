//! With the `opentelemetry` feature: an emitter told to propagate traces puts the trace
//! context of its `hermes.emit` span in the message, and the worker's `hermes.handle` span
//! continues that trace, as an OpenTelemetry SDK tracer provider with an in-memory exporter
//! sees it. Without the option, or without an OpenTelemetry layer, nothing is written.
//!
//! Every test has a subscriber of its own, on the thread that runs it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, Emitter, HandlerError, JsonSerializer, Message, RetryPolicy,
    Serializer, handler_fn,
};
use hermes_testkit::MemoryDriver;
use opentelemetry::trace::{SpanId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A tracer provider that keeps every finished span, and a subscriber that reports tracing
/// spans to it.
struct Otel {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
    _default: tracing::subscriber::DefaultGuard,
}

impl Otel {
    fn install() -> Otel {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("hermes-test"));
        let subscriber = tracing_subscriber::registry().with(layer);
        let default = tracing::subscriber::set_default(subscriber);
        Otel {
            exporter,
            provider,
            _default: default,
        }
    }

    /// The finished spans named `name`.
    fn spans(&self, name: &str) -> Vec<SpanData> {
        self.provider.force_flush().unwrap();
        self.exporter
            .get_finished_spans()
            .unwrap()
            .into_iter()
            .filter(|s| s.name == name)
            .collect()
    }
}

fn block_on<F: std::future::Future>(work: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(work)
}

/// Runs a worker over `count` messages and returns the traceparents its handler saw.
async fn handle(driver: &MemoryDriver, count: u64) -> Vec<Option<String>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut dispatcher = Dispatcher::new(driver.clone()).max_items(count);
    let record = seen.clone();
    dispatcher.register_fn("traced", move |m: Message| {
        let record = record.clone();
        async move {
            record
                .lock()
                .unwrap()
                .push(m.traceparent().map(str::to_owned));
            Ok(true)
        }
    });
    tokio::time::timeout(Duration::from_secs(20), dispatcher.handle(&[]))
        .await
        .expect("the worker finished")
        .expect("the worker ran");
    seen.lock().unwrap().clone()
}

#[test]
fn the_worker_span_continues_the_trace_of_the_emitting_span() {
    let otel = Otel::install();
    let driver = MemoryDriver::new();
    let seen = block_on(async {
        let emitter = Emitter::new(driver.clone()).propagate_trace(true);
        emitter
            .emit(&Message::new("traced"), DEFAULT_PRIORITY)
            .instrument(tracing::info_span!("request"))
            .await
            .unwrap();
        handle(&driver, 1).await
    });
    let [request] = &otel.spans("request")[..] else {
        panic!("one request span")
    };
    let [emit] = &otel.spans("hermes.emit")[..] else {
        panic!("one emit span")
    };
    let [handled] = &otel.spans("hermes.handle")[..] else {
        panic!("one handle span")
    };
    assert_eq!(emit.parent_span_id, request.span_context.span_id());
    assert_eq!(
        handled.span_context.trace_id(),
        request.span_context.trace_id(),
        "the worker's span is in the emitter's trace"
    );
    assert_eq!(
        handled.parent_span_id,
        emit.span_context.span_id(),
        "its parent is the emit span"
    );
    assert!(handled.parent_span_is_remote);
    assert_eq!(
        seen,
        [Some(format!(
            "00-{}-{}-01",
            emit.span_context.trace_id(),
            emit.span_context.span_id()
        ))],
        "the message carried the emit span's context, sampled"
    );
}

#[test]
fn without_the_option_no_traceparent_is_written_and_the_worker_starts_its_own_trace() {
    let otel = Otel::install();
    let driver = MemoryDriver::new();
    block_on(async {
        Emitter::new(driver.clone())
            .emit(&Message::new("traced"), DEFAULT_PRIORITY)
            .instrument(tracing::info_span!("request"))
            .await
            .unwrap();
    });
    let bytes = driver
        .pull_raw(DEFAULT_PRIORITY)
        .unwrap()
        .expect("the message");
    assert!(
        !String::from_utf8_lossy(&bytes).contains("traceparent"),
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    driver.push_raw(DEFAULT_PRIORITY, &bytes).unwrap();
    let seen = block_on(handle(&driver, 1));
    assert_eq!(seen, [None]);
    let [request] = &otel.spans("request")[..] else {
        panic!("one request span")
    };
    let [handled] = &otel.spans("hermes.handle")[..] else {
        panic!("one handle span")
    };
    assert_ne!(
        handled.span_context.trace_id(),
        request.span_context.trace_id()
    );
    assert_eq!(handled.parent_span_id, SpanId::INVALID, "a root span");
}

#[test]
fn without_an_opentelemetry_layer_the_option_writes_nothing() {
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry());
    let driver = MemoryDriver::new();
    block_on(async {
        Emitter::new(driver.clone())
            .propagate_trace(true)
            .emit(&Message::new("traced"), DEFAULT_PRIORITY)
            .instrument(tracing::info_span!("request"))
            .await
            .unwrap();
    });
    assert_eq!(block_on(handle(&driver, 1)), [None]);
}

#[test]
fn a_message_that_has_a_traceparent_keeps_it_and_the_worker_continues_that_trace() {
    let otel = Otel::install();
    let driver = MemoryDriver::new();
    let message = Message::builder("traced")
        .traceparent(TRACEPARENT)
        .build()
        .unwrap();
    let seen = block_on(async {
        Emitter::new(driver.clone())
            .propagate_trace(true)
            .emit(&message, DEFAULT_PRIORITY)
            .await
            .unwrap();
        handle(&driver, 1).await
    });
    assert_eq!(seen, [Some(TRACEPARENT.to_owned())]);
    let [handled] = &otel.spans("hermes.handle")[..] else {
        panic!("one handle span")
    };
    assert_eq!(
        handled.span_context.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(handled.parent_span_id.to_string(), "00f067aa0ba902b7");
}

#[test]
fn every_message_of_a_batch_carries_the_batch_span_and_a_retry_copy_keeps_it() {
    let otel = Otel::install();
    let driver = MemoryDriver::new();
    block_on(async {
        let emitter = Emitter::new(driver.clone()).propagate_trace(true);
        let batch = [Message::new("flaky"), Message::new("flaky")];
        emitter
            .emit_batch(&batch, DEFAULT_PRIORITY)
            .instrument(tracing::info_span!("request"))
            .await
            .unwrap();
        let mut dispatcher = Dispatcher::new(driver.clone()).max_items(4);
        dispatcher.register_handler(
            "flaky",
            handler_fn(|m: Message| async move {
                if m.retries() == 0 {
                    Err(HandlerError::msg("try again"))
                } else {
                    Ok(true)
                }
            })
            .with_retry(RetryPolicy::fixed(Duration::ZERO, 3)),
        );
        tokio::time::timeout(Duration::from_secs(20), dispatcher.handle(&[]))
            .await
            .expect("the worker finished")
            .expect("the worker ran");
    });
    let [emit] = &otel.spans("hermes.emit")[..] else {
        panic!("one emit span for the batch")
    };
    let handled = otel.spans("hermes.handle");
    assert_eq!(handled.len(), 4, "two messages, each with one retry");
    for span in &handled {
        assert_eq!(span.span_context.trace_id(), emit.span_context.trace_id());
        assert_eq!(span.parent_span_id, emit.span_context.span_id());
    }
}

#[test]
fn a_traceparent_survives_the_wire_of_the_memory_driver() {
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry());
    let driver = MemoryDriver::new();
    let message = Message::builder("traced")
        .traceparent(TRACEPARENT)
        .build()
        .unwrap();
    block_on(async {
        Emitter::new(driver.clone())
            .emit(&message, DEFAULT_PRIORITY)
            .await
            .unwrap();
    });
    let bytes = driver
        .pull_raw(DEFAULT_PRIORITY)
        .unwrap()
        .expect("the message");
    assert_eq!(bytes, JsonSerializer.serialize(&message).unwrap());
    assert_eq!(
        JsonSerializer.deserialize(&bytes).unwrap().traceparent(),
        Some(TRACEPARENT)
    );
}
