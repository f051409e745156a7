//! How the dashboard shows times, figures and messages, as text and JSON; the `hermes` command
//! prints them the same way.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use hermes_core::Message;
use hermes_core::flow::{Limits, Rate};
use hermes_core::inspect::{Figure, QueueStats};
use hermes_core::tracking::{BatchStatus, CallbackState, StepState, WorkflowState};
use hermes_core::workers::{RunningMessage, ScheduledEntry, TypeLimits, WorkerInfo};
use serde_json::{Value, json};

/// `time` in RFC 3339, in UTC, to the second: `2026-12-24T17:00:00Z`.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
///
/// let christmas = UNIX_EPOCH + Duration::from_secs(1_798_131_600);
/// assert_eq!(hermes_dashboard::view::rfc3339(christmas), "2026-12-24T17:00:00Z");
/// ```
pub fn rfc3339(time: SystemTime) -> String {
    let time = ::time::OffsetDateTime::from(time);
    let time = time.replace_nanosecond(0).unwrap_or(time);
    time.format(&::time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| "an unprintable time".to_owned())
}

/// A time given as Unix seconds, as [`rfc3339`] shows it.
pub fn unix_rfc3339(at: f64) -> String {
    rfc3339(hermes_core::time::from_unix(at))
}

/// A queue's latency to a tenth of a second: `1.5s`, `~1.5s` when approximate, `?` when the
/// backend cannot tell.
pub fn latency(figure: Figure<Duration>) -> String {
    match figure {
        Figure::Exact(d) => format!("{:.1}s", d.as_secs_f64()),
        Figure::Approximate(d) => format!("~{:.1}s", d.as_secs_f64()),
        Figure::Unknown => "?".to_owned(),
    }
}

/// A count as JSON: the number, `{"approximate": n}`, or `null` when unknown.
fn count(figure: Figure<u64>) -> Value {
    match figure {
        Figure::Exact(n) => json!(n),
        Figure::Approximate(n) => json!({ "approximate": n }),
        Figure::Unknown => Value::Null,
    }
}

/// A queue's figures as JSON: `name`, `priority`, the counts (`waiting`, `delayed`,
/// `in_flight`, `dead`, `consumers`) and `latency_seconds`, each as [`Figure`]s show in JSON
/// (a number, `{"approximate": n}`, or `null`).
pub fn queue_json(queue: &QueueStats) -> Value {
    let latency = match queue.latency {
        Figure::Exact(d) => json!(d.as_secs_f64()),
        Figure::Approximate(d) => json!({ "approximate": d.as_secs_f64() }),
        Figure::Unknown => Value::Null,
    };
    json!({
        "name": queue.name,
        "priority": queue.priority,
        "waiting": count(queue.waiting),
        "delayed": count(queue.delayed),
        "in_flight": count(queue.in_flight),
        "dead": count(queue.dead),
        "latency_seconds": latency,
        "consumers": count(queue.consumers),
    })
}

/// A message as JSON, payload included: `id`, `type`, `payload`, `created`, `execute_at`,
/// `retries`. A payload still sealed (no key given, or not the one it needs) shows as sealed,
/// with the key's id and its size, never its bytes.
pub fn message_json(message: &Message) -> Value {
    let payload = match hermes_seal::stored_form(message.payload()) {
        Some(form) if form.key.is_some() => Value::String(format!(
            "<sealed with the key {:?}, {} bytes>",
            form.key.unwrap_or_default(),
            form.len
        )),
        _ => message.payload().cloned().unwrap_or(Value::Null),
    };
    json!({
        "id": message.id(),
        "type": message.message_type(),
        "payload": payload,
        "created": message.created(),
        "execute_at": message.execute_at(),
        "retries": message.retries(),
    })
}

/// A message a worker runs: its id, its type, and how long it has run
/// (`m-7 (report.export) for 12 s`).
pub fn running(message: &RunningMessage) -> String {
    let seconds = (hermes_core::time::unix_now() - message.since).max(0.0);
    format!(
        "{} ({}) for {seconds:.0} s",
        message.id, message.message_type
    )
}

/// A batch callback's state: `none`, `waiting`, `sent` or `done`.
pub fn callback(state: CallbackState) -> &'static str {
    match state {
        CallbackState::None => "none",
        CallbackState::Waiting => "waiting",
        CallbackState::Sent => "sent",
        CallbackState::Done => "done",
        _ => "unknown",
    }
}

/// A batch's state: `open` (it takes more jobs), `running` or `done`.
pub fn batch_state(status: &BatchStatus) -> &'static str {
    match (status.open, status.pending) {
        (true, _) => "open",
        (false, 0) => "done",
        _ => "running",
    }
}

/// A workflow's state: `running`, `succeeded` or `failed at step <name>`.
pub fn workflow_state(state: &WorkflowState) -> String {
    match state {
        WorkflowState::Running => "running".to_owned(),
        WorkflowState::Succeeded => "succeeded".to_owned(),
        WorkflowState::Failed { step } => format!("failed at step {step}"),
        _ => "unknown".to_owned(),
    }
}

/// A workflow step's state: `pending`, `sent`, `succeeded`, `failed: <reason>` or
/// `not run (<step> failed)`.
pub fn step_state(state: &StepState) -> String {
    match state {
        StepState::Pending => "pending".to_owned(),
        StepState::Sent => "sent".to_owned(),
        StepState::Succeeded => "succeeded".to_owned(),
        StepState::Failed { reason } => format!("failed: {reason}"),
        StepState::Skipped { after } => format!("not run ({after} failed)"),
        _ => "unknown".to_owned(),
    }
}

/// A cron entry across the live workers whose schedulers run it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AnnouncedEntry {
    /// The entry as the most recently announced worker has it.
    pub entry: ScheduledEntry,
    /// The earliest next tick any of them announces.
    pub next: Option<f64>,
    /// The latest tick any of them emitted or found emitted.
    pub previous: Option<f64>,
    /// How many workers run it.
    pub workers: usize,
}

/// The cron entries the schedulers of `workers` announce, by name.
pub fn cron_entries(workers: &[WorkerInfo]) -> Vec<AnnouncedEntry> {
    let mut merged: BTreeMap<String, AnnouncedEntry> = BTreeMap::new();
    let mut newest_first: Vec<&WorkerInfo> = workers.iter().collect();
    newest_first.sort_by(|a, b| b.announced.total_cmp(&a.announced));
    for worker in newest_first {
        for entry in &worker.schedules {
            let slot = merged
                .entry(entry.name.clone())
                .or_insert_with(|| AnnouncedEntry {
                    entry: entry.clone(),
                    next: None,
                    previous: None,
                    workers: 0,
                });
            slot.workers += 1;
            slot.next = [slot.next, entry.next]
                .into_iter()
                .flatten()
                .reduce(f64::min);
            slot.previous = [slot.previous, entry.previous]
                .into_iter()
                .flatten()
                .reduce(f64::max);
        }
    }
    merged.into_values().collect()
}

/// A job type's limits as the live workers announce them.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AnnouncedLimits {
    /// The type and its limits, as the most recently announced worker has them.
    pub limits: TypeLimits,
    /// How many workers announce limits for the type.
    pub workers: usize,
    /// Whether some of them announce other limits than the newest (a deploy under way).
    pub differ: bool,
}

/// The limits the live `workers` announce, by type.
pub fn announced_limits(workers: &[WorkerInfo]) -> Vec<AnnouncedLimits> {
    let mut merged: BTreeMap<String, AnnouncedLimits> = BTreeMap::new();
    let mut newest_first: Vec<&WorkerInfo> = workers.iter().collect();
    newest_first.sort_by(|a, b| b.announced.total_cmp(&a.announced));
    for worker in newest_first {
        for limits in &worker.limits {
            let slot = merged
                .entry(limits.message_type.clone())
                .or_insert_with(|| AnnouncedLimits {
                    limits: limits.clone(),
                    workers: 0,
                    differ: false,
                });
            slot.workers += 1;
            slot.differ |= slot.limits != *limits;
        }
    }
    merged.into_values().collect()
}

/// A rate as people read it: `50 per 1m`, `3 per 250ms`.
pub fn rate(rate: &Rate) -> String {
    let period = rate.period();
    let shown = if period.subsec_millis() != 0 || period < Duration::from_secs(1) {
        format!("{}ms", period.as_millis())
    } else {
        let secs = period.as_secs();
        match secs {
            s if s % 3600 == 0 => format!("{}h", s / 3600),
            s if s % 60 == 0 => format!("{}m", s / 60),
            s => format!("{s}s"),
        }
    };
    format!("{} per {shown}", rate.max())
}

/// Each limit of `limits`: what it bounds (`concurrency`, `rate`, `concurrency per key`, `rate
/// per key`) and what it allows (`5 at once`, `50 per 1m`).
pub fn limit_lines(limits: &Limits) -> Vec<(&'static str, String)> {
    let mut lines = Vec::new();
    if let Some(max) = limits.concurrency_limit() {
        lines.push(("concurrency", format!("{max} at once")));
    }
    if let Some(r) = limits.rate_limit() {
        lines.push(("rate", rate(&r)));
    }
    if let Some(max) = limits.concurrency_per_key_limit() {
        lines.push(("concurrency per key", format!("{max} at once")));
    }
    if let Some(r) = limits.rate_per_key_limit() {
        lines.push(("rate per key", rate(&r)));
    }
    lines
}

/// How many characters of a payload a list shows.
pub const PREVIEW_CHARS: usize = 120;

/// A message's payload on one line for a list, cut to [`PREVIEW_CHARS`] characters with its
/// size when longer (`{"n":1,…} (2.3 MiB)`); a sealed payload as [`message_json`] shows it.
pub fn preview(message: &Message) -> String {
    let shown = message_json(message)["payload"].clone();
    let text = match &shown {
        Value::String(sealed) if hermes_seal::stored_form(message.payload()).is_some() => {
            return sealed.clone();
        }
        other => other.to_string(),
    };
    cut(&text, PREVIEW_CHARS)
}

/// `text` cut to `chars` characters, followed by `…` and its whole size when longer.
pub fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}… ({})", &text[..at], size(text.len())),
    }
}

/// A size in bytes as people read it: `512 B`, `3.4 KiB`, `2.0 MiB`.
pub fn size(bytes: usize) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KIB {
        format!("{bytes} B")
    } else if b < KIB * KIB {
        format!("{:.1} KiB", b / KIB)
    } else {
        format!("{:.1} MiB", b / KIB / KIB)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_merge_by_type_and_read_as_people_say_them() {
        let mut old = WorkerInfo::new(1, &[], Duration::from_secs(30));
        old.announced = 1.0;
        old.limits = vec![TypeLimits::new("a", Limits::new().concurrency(2))];
        let mut new = WorkerInfo::new(1, &[], Duration::from_secs(30));
        new.announced = 2.0;
        new.limits = vec![
            TypeLimits::new("a", Limits::new().concurrency(3)),
            TypeLimits::new("b", Limits::new().rate(Rate::per_minute(50))),
        ];
        let merged = announced_limits(&[old, new]);
        assert_eq!(merged.len(), 2);
        assert_eq!(
            merged[0].limits.limits.concurrency_limit(),
            Some(3),
            "the newest wins"
        );
        assert!(merged[0].differ && merged[0].workers == 2);
        assert!(!merged[1].differ && merged[1].workers == 1);
        assert_eq!(rate(&Rate::per_minute(50)), "50 per 1m");
        assert_eq!(
            rate(&Rate::new(3, Duration::from_millis(250))),
            "3 per 250ms"
        );
        assert_eq!(rate(&Rate::new(3, Duration::from_secs(90))), "3 per 90s");
        let keyed = Limits::new().concurrency_per_key(1).rate(Rate::per_hour(9));
        assert_eq!(
            limit_lines(&keyed),
            [
                ("rate", "9 per 1h".to_owned()),
                ("concurrency per key", "1 at once".to_owned())
            ]
        );
    }

    #[test]
    fn long_texts_are_cut_with_their_size() {
        assert_eq!(cut("short", 10), "short");
        let long = "é".repeat(300);
        let shown = cut(&long, 4);
        assert_eq!(shown, "éééé… (600 B)");
        assert_eq!(size(3 * 1024 * 1024), "3.0 MiB");
        let message = Message::builder("t")
            .payload(&json!({ "blob": "x".repeat(5000) }))
            .build()
            .unwrap();
        let line = preview(&message);
        assert!(line.chars().count() < PREVIEW_CHARS + 20, "{line}");
        assert!(line.ends_with("(4.9 KiB)"), "{line}");
    }
}
