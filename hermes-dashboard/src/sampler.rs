//! The overview's live figures: every few seconds the dashboard reads the live workers and
//! turns their counts into messages handled and failed since it started, and a throughput
//! series for the chart.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use hermes_core::workers::WorkerInfo;
use serde::Serialize;

use axum::extract::{Request, State as Shared};
use axum::middleware::Next;
use axum::response::Response;

use crate::state::State;

/// How often the workers are read.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(2);

/// How many samples the chart keeps: five minutes.
const KEEP: usize = 150;

/// One point of the throughput chart.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Sample {
    /// When, as Unix seconds.
    pub(crate) at: f64,
    /// Messages handled per second, failed ones included, over each worker's last
    /// announcement interval.
    pub(crate) handled: f64,
    /// Messages failed per second.
    pub(crate) failed: f64,
}

/// What the overview shows of the workers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Throughput {
    /// When the dashboard started, as Unix seconds.
    pub(crate) since: f64,
    /// Messages handled since then; `None` when the backend lists no workers.
    pub(crate) handled: Option<u64>,
    /// Messages failed since then; `None` when the backend lists no workers.
    pub(crate) failed: Option<u64>,
    /// The chart, oldest first.
    pub(crate) samples: Vec<Sample>,
}

/// What was last seen of one worker.
struct Seen {
    handled: u64,
    failed: u64,
    announced: f64,
    /// Handled and failed per second between its last two announcements.
    rate: (f64, f64),
}

struct Figures {
    seen: HashMap<String, Seen>,
    handled: u64,
    failed: u64,
    listed: bool,
    samples: VecDeque<Sample>,
}

/// The counts since the dashboard started and the recent throughput, from successive lists of
/// the live workers.
pub(crate) struct Sampler {
    since: f64,
    figures: Mutex<Figures>,
}

impl Sampler {
    /// A sampler counting from `since` (Unix seconds).
    pub(crate) fn new(since: f64) -> Self {
        Sampler {
            since,
            figures: Mutex::new(Figures {
                seen: HashMap::new(),
                handled: 0,
                failed: 0,
                listed: false,
                samples: VecDeque::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Figures> {
        self.figures.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes in the live `workers` as listed at `now`: what each handled since its previous
    /// announcement counts, and one sample is added. A worker seen for the first time counts
    /// what it handled only when it started after the dashboard did.
    pub(crate) fn observe(&self, workers: &[WorkerInfo], now: f64) {
        let mut figures = self.lock();
        let figures = &mut *figures;
        figures.listed = true;
        let mut live = HashMap::with_capacity(workers.len());
        for worker in workers {
            let seen = match figures.seen.remove(&worker.id) {
                Some(before) if worker.announced > before.announced => {
                    let handled = worker.handled.saturating_sub(before.handled);
                    let failed = worker.failed.saturating_sub(before.failed);
                    figures.handled += handled;
                    figures.failed += failed;
                    let took = worker.announced - before.announced;
                    Seen {
                        handled: worker.handled,
                        failed: worker.failed,
                        announced: worker.announced,
                        rate: (handled as f64 / took, failed as f64 / took),
                    }
                }
                Some(before) => before,
                None => {
                    let mut rate = (0.0, 0.0);
                    if worker.started >= self.since {
                        figures.handled += worker.handled;
                        figures.failed += worker.failed;
                        let took = worker.announced - worker.started;
                        if took > 0.0 {
                            rate = (worker.handled as f64 / took, worker.failed as f64 / took);
                        }
                    }
                    Seen {
                        handled: worker.handled,
                        failed: worker.failed,
                        announced: worker.announced,
                        rate,
                    }
                }
            };
            live.insert(worker.id.clone(), seen);
        }
        let (handled, failed) = live
            .values()
            .fold((0.0, 0.0), |(h, f), s| (h + s.rate.0, f + s.rate.1));
        figures.seen = live;
        if figures.samples.len() == KEEP {
            figures.samples.pop_front();
        }
        figures.samples.push_back(Sample {
            at: now,
            handled,
            failed,
        });
    }

    /// The counts and the chart as they stand.
    pub(crate) fn throughput(&self) -> Throughput {
        let figures = self.lock();
        Throughput {
            since: self.since,
            handled: figures.listed.then_some(figures.handled),
            failed: figures.listed.then_some(figures.failed),
            samples: figures.samples.iter().copied().collect(),
        }
    }
}

/// Passes every request on. The first one reads the workers once before it is answered, so
/// its page shows counts, and starts the task reading them every [`SAMPLE_EVERY`]: a router
/// may be built outside a runtime, never served outside one.
pub(crate) async fn start_sampling(
    Shared(state): Shared<Arc<State>>,
    request: Request,
    next: Next,
) -> Response {
    state
        .sampling
        .get_or_init(|| async {
            sample(&state).await;
            tokio::spawn(keep_sampling(Arc::downgrade(&state)));
        })
        .await;
    next.run(request).await
}

/// Reads the workers into the state's sampler; nothing on a backend that lists no workers,
/// or when the read fails.
async fn sample(state: &State) {
    let Some(workers) = state.driver.workers() else {
        return;
    };
    if let Ok(Ok(listed)) = tokio::time::timeout(state.timeout, workers.list()).await {
        state
            .sampler
            .observe(&listed, hermes_core::time::unix_now());
    }
}

/// Reads the workers every [`SAMPLE_EVERY`] until the router holding the state is dropped.
async fn keep_sampling(state: Weak<State>) {
    loop {
        tokio::time::sleep(SAMPLE_EVERY).await;
        let Some(shared) = state.upgrade() else {
            return;
        };
        if shared.driver.workers().is_none() {
            return;
        }
        sample(&shared).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(id: &str, started: f64, announced: f64, handled: u64, failed: u64) -> WorkerInfo {
        let mut w = WorkerInfo::new(1, &[], Duration::from_secs(30));
        w.id = id.to_owned();
        w.started = started;
        w.announced = announced;
        w.handled = handled;
        w.failed = failed;
        w
    }

    #[test]
    fn counts_only_what_was_handled_since_the_dashboard_started() {
        let sampler = Sampler::new(100.0);
        assert_eq!(sampler.throughput().handled, None, "nothing listed yet");
        // `old` ran before the dashboard: its 50 are not counted; `new` started after: its 4 are.
        sampler.observe(
            &[
                worker("old", 10.0, 101.0, 50, 5),
                worker("new", 100.5, 102.5, 4, 1),
            ],
            103.0,
        );
        let t = sampler.throughput();
        assert_eq!((t.handled, t.failed), (Some(4), Some(1)));
        assert_eq!(t.samples.last().unwrap().handled, 2.0, "4 over 2 s");

        // Not announced again: nothing new counts, the rates stay.
        sampler.observe(
            &[
                worker("old", 10.0, 101.0, 50, 5),
                worker("new", 100.5, 102.5, 4, 1),
            ],
            105.0,
        );
        assert_eq!(sampler.throughput().handled, Some(4));

        // Announced again: the differences count, and the chart sums the workers' rates.
        sampler.observe(
            &[
                worker("old", 10.0, 111.0, 150, 5),
                worker("new", 100.5, 112.5, 24, 3),
            ],
            113.0,
        );
        let t = sampler.throughput();
        assert_eq!((t.handled, t.failed), (Some(124), Some(3)));
        let last = t.samples.last().unwrap();
        assert_eq!((last.handled, last.failed), (12.0, 0.2));
        assert_eq!(t.samples.len(), 3);

        // A worker that went away no longer adds to the throughput; its counts stay.
        sampler.observe(&[worker("new", 100.5, 112.5, 24, 3)], 115.0);
        let t = sampler.throughput();
        assert_eq!(t.handled, Some(124));
        assert_eq!(t.samples.last().unwrap().handled, 2.0);
    }

    #[test]
    fn keeps_five_minutes_of_samples() {
        let sampler = Sampler::new(0.0);
        for i in 0..KEEP + 10 {
            sampler.observe(&[], i as f64);
        }
        let t = sampler.throughput();
        assert_eq!(t.samples.len(), KEEP);
        assert_eq!(t.samples[0].at, 10.0);
    }
}
