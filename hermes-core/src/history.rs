//! What the workers did, per minute and per hour and per job type, kept by the backend through
//! its [`Counters`] facet for a bounded time, so a dashboard started now shows the last hour
//! minute by minute and the last 48 hours hour by hour.
//!
//! The [`Dispatcher`](crate::Dispatcher) of a backend with counters records each message it
//! handles in a [`Recorder`] and adds what it recorded to the backend every few seconds: in the
//! bucket of the minute (`m<unix minute>`, kept [`MINUTES_KEPT`]) and of the hour (`h<unix
//! hour>`, kept [`HOURS_KEPT`]). Each bucket holds, per job type, the messages handled, failed
//! and retried, and how many took (and waited) up to each bound of [`BOUNDS_MS`].
//!
//! ```
//! use std::time::Duration;
//! use hermes_core::history::{Recorder, figures};
//!
//! let recorder = Recorder::new();
//! recorder.handled("report.export", false, Duration::from_millis(40), 1_800_000_000.0);
//! recorder.handled("report.export", true, Duration::from_millis(900), 1_800_000_010.0);
//! let read = recorder.pending();
//! let minute = read.iter().find(|(bucket, _)| bucket.starts_with('m')).unwrap();
//! let shown = figures(std::slice::from_ref(minute));
//! assert_eq!((shown[0].handled, shown[0].failed), (2, 1));
//! assert_eq!(shown[0].duration_p50, Some(Duration::from_millis(50)));
//! ```

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::driver::Counters;
use crate::{Error, Priority};

/// How long a minute's bucket is kept.
pub const MINUTES_KEPT: Duration = Duration::from_secs(65 * 60);
/// How long an hour's bucket is kept.
pub const HOURS_KEPT: Duration = Duration::from_secs(49 * 3600);
/// The bounds of the duration and wait histograms, in milliseconds; a last bucket holds what
/// took longer than the last bound.
pub const BOUNDS_MS: [u64; 16] = [
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000, 300_000,
];

/// Separates a job type from its counter's name.
const SEPARATOR: char = '\u{1f}';
/// Separates a queue's priority from its counter's name: `<priority>\u{1e}w<slot>`.
const QUEUE_SEPARATOR: char = '\u{1e}';

/// The bucket of the minute holding `at` (Unix seconds).
pub fn minute_bucket(at: f64) -> String {
    format!("m{}", (at / 60.0).floor() as i64)
}

/// The bucket of the hour holding `at` (Unix seconds).
pub fn hour_bucket(at: f64) -> String {
    format!("h{}", (at / 3600.0).floor() as i64)
}

/// The start of `bucket` in Unix seconds, or `None` for a name no bucket of here has.
pub fn bucket_start(bucket: &str) -> Option<f64> {
    let (scale, number) = match bucket.split_at_checked(1)? {
        ("m", n) => (60.0, n),
        ("h", n) => (3600.0, n),
        _ => return None,
    };
    Some(number.parse::<i64>().ok()? as f64 * scale)
}

/// The buckets of the last `count` minutes up to `now`, oldest first.
pub fn last_minutes(now: f64, count: usize) -> Vec<String> {
    (0..count)
        .rev()
        .map(|back| minute_bucket(now - back as f64 * 60.0))
        .collect()
}

/// The buckets of the last `count` hours up to `now`, oldest first.
pub fn last_hours(now: f64, count: usize) -> Vec<String> {
    (0..count)
        .rev()
        .map(|back| hour_bucket(now - back as f64 * 3600.0))
        .collect()
}

fn counter(message_type: &str, metric: &str) -> String {
    format!("{message_type}{SEPARATOR}{metric}")
}

fn slot(took: Duration) -> usize {
    let ms = took.as_millis();
    BOUNDS_MS
        .iter()
        .position(|bound| ms <= u128::from(*bound))
        .unwrap_or(BOUNDS_MS.len())
}

/// What a worker handled and has not yet added to the backend, by bucket and counter.
#[derive(Debug, Default)]
pub struct Recorder {
    pending: Mutex<BTreeMap<String, BTreeMap<String, u64>>>,
}

impl Recorder {
    /// A recorder holding nothing.
    pub fn new() -> Self {
        Recorder::default()
    }

    fn count(&self, at: f64, counts: &[(String, u64)]) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        for bucket in [minute_bucket(at), hour_bucket(at)] {
            let counters = pending.entry(bucket).or_default();
            for (name, n) in counts {
                *counters.entry(name.clone()).or_default() += n;
            }
        }
    }

    /// A message of `message_type` whose handlers finished at `at` (Unix seconds) after
    /// `took`, `failed` or not.
    pub fn handled(&self, message_type: &str, failed: bool, took: Duration, at: f64) {
        let mut counts = vec![
            (counter(message_type, "handled"), 1),
            (counter(message_type, &format!("d{}", slot(took))), 1),
        ];
        if failed {
            counts.push((counter(message_type, "failed"), 1));
        }
        self.count(at, &counts);
    }

    /// A message of `message_type` from the queue of `priority` that started at `at` after
    /// waiting `waited` past its due time.
    pub fn waited(&self, message_type: &str, priority: Priority, waited: Duration, at: f64) {
        let slot = slot(waited);
        self.count(
            at,
            &[
                (counter(message_type, &format!("w{slot}")), 1),
                (format!("{priority}{QUEUE_SEPARATOR}w{slot}"), 1),
            ],
        );
    }

    /// A message of `message_type` queued again at `at` to be retried.
    pub fn retried(&self, message_type: &str, at: f64) {
        self.count(at, &[(counter(message_type, "retried"), 1)]);
    }

    /// What is recorded and not yet added, by bucket, as [`Counters::read`] gives it.
    pub fn pending(&self) -> Vec<(String, Vec<(String, u64)>)> {
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending
            .iter()
            .map(|(bucket, counts)| (bucket.clone(), counts.clone().into_iter().collect()))
            .collect()
    }

    /// Adds what is recorded to `counters`, and forgets it; what could not be added is kept for
    /// the next flush.
    ///
    /// # Errors
    /// The first error of the backend.
    ///
    /// # Cancellation safety
    /// Dropping the future may count some of it twice at the next flush.
    pub async fn flush(&self, counters: &dyn Counters) -> Result<(), Error> {
        let taken = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        let mut left = BTreeMap::new();
        let mut failure = None;
        for (bucket, counts) in taken {
            let keep = if bucket.starts_with('m') {
                MINUTES_KEPT
            } else {
                HOURS_KEPT
            };
            let list: Vec<(String, u64)> = counts.clone().into_iter().collect();
            if failure.is_none() {
                match counters.add(&bucket, &list, keep).await {
                    Ok(()) => continue,
                    Err(e) => failure = Some(e),
                }
            }
            left.insert(bucket, counts);
        }
        if !left.is_empty() {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            for (bucket, counts) in left {
                let into = pending.entry(bucket).or_default();
                for (name, n) in counts {
                    *into.entry(name).or_default() += n;
                }
            }
        }
        failure.map_or(Ok(()), Err)
    }
}

/// What one job type did over some buckets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TypeFigures {
    /// The job type.
    pub message_type: String,
    /// Messages handled, failed ones included.
    pub handled: u64,
    /// Messages whose handlers failed.
    pub failed: u64,
    /// Messages queued again to be retried.
    pub retried: u64,
    /// The bound half of the runs took at most; `None` without runs, or when past the last bound.
    pub duration_p50: Option<Duration>,
    /// The bound 95 in 100 runs took at most.
    pub duration_p95: Option<Duration>,
    /// The bound half of the messages waited at most past their due time.
    pub wait_p50: Option<Duration>,
    /// The bound 95 in 100 messages waited at most.
    pub wait_p95: Option<Duration>,
}

fn quantile(histogram: &[u64], q: f64) -> Option<Duration> {
    let total: u64 = histogram.iter().sum();
    if total == 0 {
        return None;
    }
    let wanted = (total as f64 * q).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, n) in histogram.iter().enumerate() {
        seen += n;
        if seen >= wanted {
            return BOUNDS_MS.get(i).map(|ms| Duration::from_millis(*ms));
        }
    }
    None
}

/// Per job type, what `read` holds (buckets as [`Counters::read`] gives them), summed over
/// the buckets, by type name.
pub fn figures(read: &[(String, Vec<(String, u64)>)]) -> Vec<TypeFigures> {
    let mut by_type: BTreeMap<&str, (TypeFigures, Vec<u64>, Vec<u64>)> = BTreeMap::new();
    for (_, counts) in read {
        for (name, n) in counts {
            let Some((message_type, metric)) = name.rsplit_once(SEPARATOR) else {
                continue;
            };
            let (shown, durations, waits) = by_type.entry(message_type).or_insert_with(|| {
                (
                    TypeFigures {
                        message_type: message_type.to_owned(),
                        ..TypeFigures::default()
                    },
                    vec![0; BOUNDS_MS.len() + 1],
                    vec![0; BOUNDS_MS.len() + 1],
                )
            });
            match metric {
                "handled" => shown.handled += n,
                "failed" => shown.failed += n,
                "retried" => shown.retried += n,
                other => {
                    let (histogram, at) = match other.split_at_checked(1) {
                        Some(("d", at)) => (&mut *durations, at),
                        Some(("w", at)) => (&mut *waits, at),
                        _ => continue,
                    };
                    if let Some(cell) = at.parse::<usize>().ok().and_then(|i| histogram.get_mut(i))
                    {
                        *cell += n;
                    }
                }
            }
        }
    }
    by_type
        .into_values()
        .map(|(mut shown, durations, waits)| {
            shown.duration_p50 = quantile(&durations, 0.5);
            shown.duration_p95 = quantile(&durations, 0.95);
            shown.wait_p50 = quantile(&waits, 0.5);
            shown.wait_p95 = quantile(&waits, 0.95);
            shown
        })
        .collect()
}

/// One point of a history chart: a bucket's start, and what every type handled and failed in it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Point {
    /// The bucket's start, in Unix seconds.
    pub at: f64,
    /// Messages handled, failed ones included.
    pub handled: u64,
    /// Messages whose handlers failed.
    pub failed: u64,
}

/// A point per bucket of `buckets` (absent ones count 0), from what `read` holds.
pub fn series(buckets: &[String], read: &[(String, Vec<(String, u64)>)]) -> Vec<Point> {
    buckets
        .iter()
        .filter_map(|bucket| {
            let at = bucket_start(bucket)?;
            let (handled, failed) = read
                .iter()
                .filter(|(b, _)| b == bucket)
                .flat_map(|(_, counts)| counts)
                .fold((0, 0), |(h, f), (name, n)| {
                    match name.rsplit_once(SEPARATOR).map(|(_, metric)| metric) {
                        Some("handled") => (h + n, f),
                        Some("failed") => (h, f + n),
                        _ => (h, f),
                    }
                });
            Some(Point {
                at,
                handled,
                failed,
            })
        })
        .collect()
}

/// How long the messages of one queue waited past their due time, bucket by bucket.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct QueueWaits {
    /// The queue's priority.
    pub priority: Priority,
    /// Per bucket, in the order asked for: the bound 95 in 100 of the messages that started in
    /// it waited at most (a wait past the last bound of [`BOUNDS_MS`] counts as that bound);
    /// `None` where none started.
    pub p95: Vec<Option<Duration>>,
    /// The same for half of them.
    pub p50: Vec<Option<Duration>>,
}

/// Per queue that started a message in any of `buckets`, by priority, its waits in each, from
/// what `read` holds.
pub fn queue_waits(buckets: &[String], read: &[(String, Vec<(String, u64)>)]) -> Vec<QueueWaits> {
    let mut histograms: BTreeMap<Priority, Vec<Vec<u64>>> = BTreeMap::new();
    for (bucket, counts) in read {
        let Some(column) = buckets.iter().position(|b| b == bucket) else {
            continue;
        };
        for (name, n) in counts {
            let Some((priority, metric)) = name.split_once(QUEUE_SEPARATOR) else {
                continue;
            };
            let (Ok(priority), Some(at)) = (priority.parse::<Priority>(), metric.strip_prefix('w'))
            else {
                continue;
            };
            let Ok(at) = at.parse::<usize>() else {
                continue;
            };
            let columns = histograms
                .entry(priority)
                .or_insert_with(|| vec![vec![0; BOUNDS_MS.len() + 1]; buckets.len()]);
            if let Some(cell) = columns[column].get_mut(at) {
                *cell += n;
            }
        }
    }
    let longest = Duration::from_millis(BOUNDS_MS[BOUNDS_MS.len() - 1]);
    let of = |histogram: &Vec<u64>, q| {
        (histogram.iter().sum::<u64>() > 0).then(|| quantile(histogram, q).unwrap_or(longest))
    };
    histograms
        .into_iter()
        .rev()
        .map(|(priority, columns)| QueueWaits {
            priority,
            p95: columns.iter().map(|h| of(h, 0.95)).collect(),
            p50: columns.iter().map(|h| of(h, 0.5)).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_name_their_minute_and_hour() {
        assert_eq!(minute_bucket(120.5), "m2");
        assert_eq!(hour_bucket(7_300.0), "h2");
        assert_eq!(bucket_start("m2"), Some(120.0));
        assert_eq!(bucket_start("h2"), Some(7_200.0));
        assert_eq!(bucket_start("x2"), None);
        assert_eq!(bucket_start(""), None);
        assert_eq!(last_minutes(600.0, 3), ["m8", "m9", "m10"]);
    }

    #[test]
    fn figures_sum_types_over_buckets_with_their_quantiles() {
        let recorder = Recorder::new();
        for ms in [3, 3, 3, 40, 4_000] {
            recorder.handled("a", ms == 4_000, Duration::from_millis(ms), 60.0);
        }
        recorder.waited("a", 100, Duration::from_millis(700), 60.0);
        recorder.retried("a", 3_600.0);
        recorder.handled("b", false, Duration::from_secs(900), 3_600.0);
        let pending = recorder.pending();
        let minutes: Vec<_> = pending
            .iter()
            .filter(|(b, _)| b.starts_with('m'))
            .cloned()
            .collect();
        let shown = figures(&minutes);
        assert_eq!(shown.len(), 2);
        let a = &shown[0];
        assert_eq!((a.handled, a.failed, a.retried), (5, 1, 1));
        assert_eq!(a.duration_p50, Some(Duration::from_millis(5)));
        assert_eq!(a.duration_p95, Some(Duration::from_millis(5_000)));
        assert_eq!(a.wait_p50, Some(Duration::from_millis(1_000)));
        assert_eq!(shown[1].duration_p50, None, "past the last bound");
        let points = series(&["m1".to_owned(), "m2".to_owned()], &minutes);
        assert_eq!(
            points[0],
            Point {
                at: 60.0,
                handled: 5,
                failed: 1
            }
        );
        assert_eq!(
            points[1],
            Point {
                at: 120.0,
                handled: 0,
                failed: 0
            }
        );
    }

    #[test]
    fn queue_waits_give_each_queues_quantiles_per_bucket() {
        let recorder = Recorder::new();
        for ms in [1, 1, 1, 90] {
            recorder.waited("a", 100, Duration::from_millis(ms), 60.0);
        }
        recorder.waited("b", 200, Duration::from_secs(3_600), 180.0);
        let pending = recorder.pending();
        let buckets = ["m1".to_owned(), "m2".to_owned(), "m3".to_owned()];
        let waits = queue_waits(&buckets, &pending);
        assert_eq!(waits.len(), 2, "{waits:?}");
        assert_eq!(waits[0].priority, 200, "the highest priority first");
        assert_eq!(
            waits[0].p95,
            [None, None, Some(Duration::from_millis(300_000))],
            "a wait past the last bound counts as that bound"
        );
        assert_eq!(waits[1].priority, 100);
        assert_eq!(waits[1].p50, [Some(Duration::from_millis(1)), None, None]);
        assert_eq!(waits[1].p95, [Some(Duration::from_millis(100)), None, None]);
        assert!(
            figures(&pending).iter().all(|f| f.message_type != "100"),
            "queue counters are no job type"
        );
    }
}
