//! Capturing log lines in tests.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::subscriber::DefaultGuard;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::{Layer, Registry};

/// Records the log lines emitted on this thread while its guard lives, as `LEVEL message`.
///
/// The subscriber is the thread's default, so run the code under test on a current-thread
/// Tokio runtime (tasks it spawns then run on the same thread).
///
/// ```
/// let (logs, _guard) = hermes_testkit::LogCapture::install();
/// tracing::info!("Start handle message #1 (t) priority:100");
/// assert!(logs.contains("INFO Start handle message #1 (t) priority:100"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct LogCapture {
    lines: Arc<Mutex<Vec<String>>>,
    fields: Arc<Mutex<Vec<String>>>,
}

impl LogCapture {
    /// Starts capturing on this thread until the guard is dropped.
    pub fn install() -> (LogCapture, DefaultGuard) {
        let capture = LogCapture::default();
        let subscriber = Registry::default().with(capture.clone());
        let guard = tracing::subscriber::set_default(subscriber);
        (capture, guard)
    }

    /// The lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether some line equals `line`.
    pub fn contains(&self, line: &str) -> bool {
        self.lines().iter().any(|l| l == line)
    }

    /// The lines so far with every field of their event after the message, as
    /// `LEVEL message name=value …`: what a structured log would show.
    pub fn lines_with_fields(&self) -> Vec<String> {
        self.fields
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many lines start with `prefix`.
    pub fn count_starting_with(&self, prefix: &str) -> usize {
        self.lines()
            .iter()
            .filter(|l| l.starts_with(prefix))
            .count()
    }
}

impl<S: Subscriber> Layer<S> for LogCapture {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        #[derive(Default)]
        struct Message {
            message: String,
            fields: String,
        }
        impl Visit for Message {
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    let _ = write!(self.message, "{value:?}");
                } else {
                    let _ = write!(self.fields, " {}={value:?}", field.name());
                }
            }
        }
        let mut message = Message::default();
        event.record(&mut message);
        let level = match *event.metadata().level() {
            Level::ERROR => "ERROR",
            Level::WARN => "WARN",
            Level::INFO => "INFO",
            Level::DEBUG => "DEBUG",
            Level::TRACE => "TRACE",
        };
        let line = format!("{level} {}", message.message);
        self.fields
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("{line}{}", message.fields));
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line);
    }
}
