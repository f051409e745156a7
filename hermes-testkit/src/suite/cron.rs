//! Scenario of periodic jobs: schedulers on several instances emit one message per tick.

use std::collections::BTreeMap;
use std::time::Duration;

use hermes_core::CancellationToken;
use hermes_core::cron::CronSchedule;
use hermes_core::time::unix_now;
use hermes_core::{CatchUp, CronEntry, Driver, Emitter, Scheduler};

use super::support::{ack, open};
use super::{Harness, Outcome};

/// How many ticks the scenario watches.
pub(crate) const TICKS: usize = 10;

/// Three schedulers, each on its own instance (as three processes), run one entry with a
/// 1-second cron for ten ticks: exactly ten messages are queued, one per tick, with the ids
/// the entry's name and the ticks give.
pub async fn three_schedulers_emit_one_message_per_tick<H: Harness>(h: &H, queue: &str) -> Outcome {
    let consumer = open(h, queue).await;
    if consumer.unique().is_none() {
        return Outcome::lacks_facet("unique");
    }
    let entry = every_second();
    let start = half_way_to_a_tick().await;
    let stop = CancellationToken::new();
    let mut running = Vec::new();
    for _ in 0..3 {
        let scheduler = Scheduler::new(Emitter::new(open(h, queue).await)).catch_up(CatchUp::None);
        scheduler.add(entry.clone()).expect("the entry");
        let stop = stop.clone();
        running.push(tokio::spawn(async move { scheduler.run(stop).await }));
    }
    sleep_until(start + TICKS as f64).await;
    stop.cancel();
    for scheduler in running {
        scheduler
            .await
            .expect("a scheduler task")
            .expect("a scheduler run");
    }

    one_message_per_tick(&consumer, start).await;
    Outcome::Passed
}

/// The entry the scenarios run: `every-second`, a message of type `tick` each second.
pub(crate) fn every_second() -> CronEntry {
    CronEntry::new(
        "every-second",
        CronSchedule::new("* * * * * *", "Europe/Bratislava").expect("a schedule"),
        "tick",
    )
}

/// Waits until half way between two ticks, and returns that time: a run of [`TICKS`]
/// seconds from then sees exactly [`TICKS`] ticks.
pub(crate) async fn half_way_to_a_tick() -> f64 {
    let start = unix_now().ceil() + 0.5;
    sleep_until(start).await;
    start
}

/// Sleeps until `at` (Unix seconds).
pub(crate) async fn sleep_until(at: f64) {
    tokio::time::sleep(Duration::from_secs_f64((at - unix_now()).max(0.0))).await;
}

/// Takes every message off the queue of `consumer` and checks that they are the ticks of
/// [`every_second`] after `start`, each once.
pub(crate) async fn one_message_per_tick(consumer: &impl Driver, start: f64) {
    let mut ids: BTreeMap<String, usize> = BTreeMap::new();
    while let Some(delivery) = consumer
        .receive(&[], Duration::from_millis(500))
        .await
        .expect("receiving")
    {
        *ids.entry(delivery.message().id().to_owned()).or_default() += 1;
        ack(consumer, &delivery).await;
    }
    let expected: Vec<String> = (1..=TICKS)
        .map(|i| format!("cron-every-second-{}", (start.floor() as i64) + i as i64))
        .collect();
    assert_eq!(
        ids.keys().cloned().collect::<Vec<_>>(),
        expected,
        "one message per tick, named by the entry and the tick"
    );
    assert!(
        ids.values().all(|n| *n == 1),
        "no tick emitted twice: {ids:?}"
    );
}
