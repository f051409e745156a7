//! The metrics and spans a worker and an emitter report, as a recorder and a subscriber see
//! them: every counter and histogram of a run with each outcome, and one span per handled
//! message and per emit, with Hermes' log lines inside.
//!
//! Every test has a subscriber of its own: a log callsite first met on a thread without one
//! can stay switched off for the test that looks at spans.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_core::telemetry::{
    DEAD_LETTERED_TOTAL, EMITTED_TOTAL, HANDLE_DURATION_SECONDS, HANDLED_TOTAL, IN_PROGRESS,
    RETRIED_TOTAL, UNDECODABLE_TOTAL, WAIT_SECONDS,
};
use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, DispatcherOptions, Driver, Emitter, HandlerError, Message,
    RetryPolicy, handler_fn,
};
use hermes_testkit::{LogCapture, MemoryDriver};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// Runs `work` on a current-thread runtime, with `recorder` as the metrics recorder.
fn with_recorder<F: std::future::Future>(recorder: &DebuggingRecorder, work: F) -> F::Output {
    metrics::with_local_recorder(recorder, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(work)
    })
}

/// Emits: 3 messages handled fine, 1 that fails without a retry policy, 1 that fails once
/// under a retry policy then succeeds, 1 whose handler runs past the time limit, 1 whose
/// handler panics, 1 of a type without a handler, and an undecodable body; then runs a worker
/// over all of them.
async fn a_run_with_every_outcome(driver: &MemoryDriver) {
    let emitter = Emitter::new(driver.clone());
    for _ in 0..3 {
        emitter
            .emit(&Message::new("fine"), DEFAULT_PRIORITY)
            .await
            .unwrap();
    }
    emitter
        .emit(&Message::new("broken"), DEFAULT_PRIORITY)
        .await
        .unwrap();
    emitter
        .emit(&Message::new("flaky"), DEFAULT_PRIORITY)
        .await
        .unwrap();
    for kind in ["slow", "crash", "orphan"] {
        emitter
            .emit(&Message::new(kind), DEFAULT_PRIORITY)
            .await
            .unwrap();
    }
    driver.push_raw(DEFAULT_PRIORITY, b"{not json").unwrap();

    let mut options = DispatcherOptions::default();
    options.max_items = 9;
    options.time_limit = Some(Duration::from_millis(50));
    options.time_limit_grace = Duration::from_millis(10);
    let mut dispatcher = Dispatcher::new(driver.clone()).options(options);
    dispatcher.register_fn("fine", |_m| async { Ok(true) });
    dispatcher.register_fn("broken", |_m| async {
        Err(HandlerError::msg("the disk is full"))
    });
    dispatcher.register_fn("slow", |_m| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(true)
    });
    dispatcher.register_fn("crash", |_m| async { panic!("the handler broke") });
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
}

type Labels = Vec<(String, String)>;

/// The counters, gauges and histogram sample counts of `recorder`, by name and labels.
fn read(recorder: &DebuggingRecorder) -> HashMap<(String, Labels), f64> {
    let mut figures = HashMap::new();
    for (key, _, _, value) in recorder.snapshotter().snapshot().into_vec() {
        let key = key.key();
        let mut labels: Labels = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        labels.sort();
        let figure = match value {
            DebugValue::Counter(n) => n as f64,
            DebugValue::Gauge(g) => g.into_inner(),
            DebugValue::Histogram(samples) => samples.len() as f64,
        };
        figures.insert((key.name().to_owned(), labels), figure);
    }
    figures
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    let mut labels: Labels = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    labels.sort();
    labels
}

#[test]
fn every_outcome_is_counted_with_its_labels() {
    let (_logs, _guard) = LogCapture::install();
    let recorder = DebuggingRecorder::new();
    let driver = MemoryDriver::new();
    with_recorder(&recorder, a_run_with_every_outcome(&driver));
    let figures = read(&recorder);
    let get = |name: &str, pairs: &[(&str, &str)]| {
        figures
            .get(&(name.to_owned(), labels(pairs)))
            .copied()
            .unwrap_or_else(|| panic!("{name} {pairs:?} in {figures:#?}"))
    };
    let emitted = |t| get(EMITTED_TOTAL, &[("type", t), ("priority", "100")]);
    assert_eq!(emitted("fine"), 3.0);
    assert_eq!(emitted("broken"), 1.0);
    assert_eq!(emitted("orphan"), 1.0);
    assert_eq!(
        emitted("flaky"),
        1.0,
        "the retry copy is a send of the worker, not an emit"
    );
    let handled = |t, o| get(HANDLED_TOTAL, &[("type", t), ("outcome", o)]);
    assert_eq!(handled("fine", "ok"), 3.0);
    assert_eq!(handled("broken", "failed"), 1.0);
    assert_eq!(handled("flaky", "failed"), 1.0);
    assert_eq!(handled("flaky", "ok"), 1.0);
    assert_eq!(handled("slow", "timed_out"), 1.0);
    assert_eq!(handled("crash", "panicked"), 1.0);
    assert_eq!(
        handled("other", "no_handler"),
        1.0,
        "an unknown type is 'other'"
    );
    assert_eq!(get(RETRIED_TOTAL, &[("type", "flaky")]), 1.0);
    assert_eq!(
        get(
            DEAD_LETTERED_TOTAL,
            &[("type", "broken"), ("reason", "failed")]
        ),
        1.0
    );
    assert_eq!(get(UNDECODABLE_TOTAL, &[]), 1.0);
    assert_eq!(get(HANDLE_DURATION_SECONDS, &[("type", "fine")]), 3.0);
    assert_eq!(get(WAIT_SECONDS, &[("type", "fine")]), 3.0);
    assert_eq!(get(IN_PROGRESS, &[]), 0.0, "nothing in progress at the end");
    assert!(
        figures
            .keys()
            .filter(|(name, _)| name.as_str() != EMITTED_TOTAL)
            .all(|(_, l)| l.iter().all(|(_, v)| v != "orphan")),
        "an unknown type never becomes a label on the worker side: {figures:#?}"
    );
}

#[test]
fn without_a_recorder_nothing_is_recorded_and_the_run_is_the_same() {
    let (_logs, _guard) = LogCapture::install();
    let driver = MemoryDriver::new();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(a_run_with_every_outcome(&driver));
    assert!(driver.is_empty());
}

/// A span as the test layer saw it: its name, its fields, and the log lines inside it.
#[derive(Debug, Default, Clone)]
struct Seen {
    name: String,
    fields: HashMap<String, String>,
    events: Vec<String>,
}

#[derive(Default)]
struct Fields(HashMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// Keeps every closed span with its fields and the messages of the events inside it.
#[derive(Clone, Default)]
struct Spans {
    open: Arc<Mutex<HashMap<u64, Seen>>>,
    closed: Arc<Mutex<Vec<Seen>>>,
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let seen = Seen {
            name: attrs.metadata().name().to_owned(),
            fields: fields.0,
            events: Vec::new(),
        };
        self.open.lock().unwrap().insert(id.into_u64(), seen);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        values.record(&mut fields);
        if let Some(seen) = self.open.lock().unwrap().get_mut(&id.into_u64()) {
            seen.fields.extend(fields.0);
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let mut fields = Fields::default();
        event.record(&mut fields);
        if let Some(seen) = self.open.lock().unwrap().get_mut(&span.id().into_u64()) {
            seen.events
                .push(fields.0.remove("message").unwrap_or_default());
        }
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        if let Some(seen) = self.open.lock().unwrap().remove(&id.into_u64()) {
            self.closed.lock().unwrap().push(seen);
        }
    }
}

#[test]
fn each_message_is_handled_in_one_span_and_each_emit_in_another() {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let _default = tracing::subscriber::set_default(subscriber);
    let driver = MemoryDriver::new();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(a_run_with_every_outcome(&driver));
    let closed = spans.closed.lock().unwrap().clone();
    let handles: Vec<&Seen> = closed
        .iter()
        .filter(|s| s.name == "hermes.handle")
        .collect();
    assert_eq!(
        handles.len(),
        9,
        "one per decodable message, the retry copy included"
    );
    let broken = handles
        .iter()
        .find(|s| s.fields["type"] == "broken")
        .expect("the broken message's span");
    assert_eq!(broken.fields["outcome"], "failed");
    for (kind, outcome) in [("slow", "timed_out"), ("crash", "panicked")] {
        let span = handles
            .iter()
            .find(|s| s.fields["type"] == kind)
            .unwrap_or_else(|| panic!("the {kind} message's span"));
        assert_eq!(span.fields["outcome"], outcome);
    }
    assert_eq!(broken.fields["driver"], "memory");
    assert_eq!(broken.fields["priority"], "100");
    assert_eq!(broken.fields["retries"], "0");
    assert!(broken.fields.contains_key("duration_ms"), "{broken:?}");
    assert!(
        broken
            .events
            .iter()
            .any(|e| e.starts_with("Start handle message #")),
        "Hermes' lines are inside the span: {broken:?}"
    );
    assert!(
        broken
            .events
            .iter()
            .any(|e| e.starts_with("Handler ") && e.contains("throws exception - the disk is full"))
    );
    let orphan = handles
        .iter()
        .find(|s| s.fields["type"] == "orphan")
        .unwrap();
    assert_eq!(orphan.fields["outcome"], "no_handler");
    let emits: Vec<&Seen> = closed.iter().filter(|s| s.name == "hermes.emit").collect();
    assert_eq!(
        emits.len(),
        8,
        "the emitter's eight; the retry copy is a send"
    );
    assert!(emits.iter().all(|s| s.fields.contains_key("id")));
    assert!(emits.iter().all(|s| {
        s.events
            .iter()
            .any(|e| e.starts_with("Emitter send message #"))
    }));
}

#[test]
fn a_handle_span_records_the_traceparent_of_its_message() {
    const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let _default = tracing::subscriber::set_default(subscriber);
    let driver = MemoryDriver::new();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let emitter = Emitter::new(driver.clone());
            let traced = Message::builder("fine")
                .traceparent(TRACEPARENT)
                .build()
                .unwrap();
            emitter.emit(&traced, DEFAULT_PRIORITY).await.unwrap();
            emitter
                .emit(&Message::new("fine"), DEFAULT_PRIORITY)
                .await
                .unwrap();
            let mut dispatcher = Dispatcher::new(driver.clone()).max_items(2);
            dispatcher.register_fn("fine", |_m| async { Ok(true) });
            dispatcher.handle(&[]).await.unwrap();
        });
    let closed = spans.closed.lock().unwrap().clone();
    let mut traceparents: Vec<Option<String>> = closed
        .iter()
        .filter(|s| s.name == "hermes.handle")
        .map(|s| s.fields.get("traceparent").cloned())
        .collect();
    traceparents.sort();
    assert_eq!(
        traceparents,
        [None, Some(TRACEPARENT.to_owned())],
        "recorded when the message has one"
    );
}

/// Emits of two types at two priorities, under one recorder and then another on the same
/// thread: each counts its own, with its labels, whatever an earlier emit built.
#[test]
fn emits_count_under_whichever_recorder_is_installed() {
    let (_logs, _guard) = LogCapture::install();
    let driver = MemoryDriver::new();
    driver.setup_priority_queue("urgent", 200).unwrap();
    let emitter = Emitter::new(driver);
    let emit_all = || async {
        for (message_type, priority) in [("a", 100), ("b", 100), ("a", 200), ("a", 100)] {
            emitter
                .emit(&Message::new(message_type), priority)
                .await
                .unwrap();
        }
    };
    for _ in 0..2 {
        let recorder = DebuggingRecorder::new();
        with_recorder(&recorder, emit_all());
        let figures = read(&recorder);
        let emitted = |t: &str, p: &str| {
            figures
                .get(&(
                    EMITTED_TOTAL.to_owned(),
                    labels(&[("type", t), ("priority", p)]),
                ))
                .copied()
        };
        assert_eq!(emitted("a", "100"), Some(2.0), "{figures:?}");
        assert_eq!(emitted("b", "100"), Some(1.0));
        assert_eq!(emitted("a", "200"), Some(1.0));
        assert_eq!(emitted("b", "200"), None);
    }
}

/// What a `fmt` subscriber writes, kept for the test.
#[derive(Clone, Default)]
struct Written(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Written {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Written {
    type Writer = Written;

    fn make_writer(&'a self) -> Written {
        self.clone()
    }
}

/// With the default text format, a handled message writes Hermes' two lines, each naming the
/// message once in its text and once in the fields (the span's), and no more; the size per
/// handled message is printed.
#[test]
fn a_handled_message_names_its_id_once_in_the_fields_of_each_line() {
    let written = Written::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(written.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let driver = MemoryDriver::new();
    let id = "0b7f4c2e-1d6a-4f0e-9a51-3c8e2d7b6a90";
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            driver
                .send(
                    &Message::builder("fine").id(id).build().unwrap(),
                    DEFAULT_PRIORITY,
                )
                .await
                .unwrap();
            let mut dispatcher = Dispatcher::new(driver.clone()).max_items(1);
            dispatcher.register_fn("fine", |_m| async { Ok(true) });
            written.0.lock().unwrap().clear();
            dispatcher.handle(&[]).await.unwrap();
        });
    let text = String::from_utf8(written.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(id)).collect();
    println!(
        "{} bytes in {} lines name the handled message:\n{}",
        lines.iter().map(|l| l.len() + 1).sum::<usize>(),
        lines.len(),
        lines.join("\n")
    );
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].contains(&format!("Start handle message #{id} (fine) priority:100")));
    assert!(lines[1].contains(&format!("End handle message #{id} (fine)")));
    for line in lines {
        assert_eq!(line.matches(id).count(), 2, "{line}");
    }
}
