//! Schedulers in separate processes on one queue: the test binary starts copies of itself,
//! each running a scheduler, and checks that one message per tick was queued.

use std::future::Future;
use std::process::{Command, Stdio};

use std::time::Duration;

use hermes_core::time::unix_now;
use hermes_core::{CatchUp, Driver, Emitter, Scheduler};

use crate::suite::cron::{
    TICKS, every_second, half_way_to_a_tick, one_message_per_tick, sleep_until,
};

/// Set in a child process: the queue its scheduler emits to.
const CHILD_QUEUE: &str = "HERMES_TESTKIT_SCHEDULER_QUEUE";
/// Set in a child process: when the run started (Unix seconds).
const CHILD_START: &str = "HERMES_TESTKIT_SCHEDULER_START";

/// How many scheduler processes run.
const PROCESSES: usize = 3;

/// The body of the test named `test` (its full path, as `cargo test -- --exact` takes it):
/// starts three copies of the test binary running only this test, each of which runs a
/// scheduler with a 1-second entry on `queue` (through a driver `open` opens) for ten ticks,
/// then checks that exactly ten messages were queued, one per tick.
///
/// In a copy (the environment says so), it runs the scheduler instead and returns.
///
/// # Panics
/// When a copy fails, or the queue does not hold one message per tick.
pub async fn three_scheduler_processes_emit_one_message_per_tick<D, F, Fut>(
    test: &str,
    queue: &str,
    open: F,
) where
    D: Driver,
    F: Fn(String) -> Fut,
    Fut: Future<Output = D>,
{
    if let (Ok(queue), Ok(start)) = (std::env::var(CHILD_QUEUE), std::env::var(CHILD_START)) {
        let start: f64 = start.parse().expect("the run's start");
        let emitter = Emitter::new(open(queue).await);
        sleep_until(start).await;
        // A copy that started late still covers the ticks from the start on (the others may
        // have emitted them: the keys tell).
        let late = Duration::from_secs_f64((unix_now() - start).max(0.0));
        let scheduler = Scheduler::new(emitter).catch_up(CatchUp::AllWithin(late));
        scheduler.add(every_second()).expect("the entry");
        let stop = hermes_core::CancellationToken::new();
        let run = tokio::spawn({
            let scheduler = scheduler.clone();
            let stop = stop.clone();
            async move { scheduler.run(stop).await }
        });
        sleep_until(start + TICKS as f64).await;
        stop.cancel();
        run.await
            .expect("the scheduler task")
            .expect("the scheduler");
        return;
    }
    let consumer = open(queue.to_owned()).await;
    // The copies need a moment to start: the run begins three seconds from now.
    let start = half_way_to_a_tick().await + 3.0;
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(std::env::current_exe().expect("the test binary"))
                .args([test, "--exact", "--nocapture", "--test-threads=1"])
                .env(CHILD_QUEUE, queue)
                .env(CHILD_START, start.to_string())
                .stdout(Stdio::null())
                .spawn()
                .expect("a copy of the test binary")
        })
        .collect();
    for mut child in children {
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .expect("waiting")
            .expect("a child's status");
        assert!(status.success(), "a scheduler process failed: {status}");
    }
    one_message_per_tick(&consumer, start).await;
}
