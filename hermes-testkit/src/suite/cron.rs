//! Scenario of periodic jobs: schedulers on several instances emit one message per tick.

use std::collections::BTreeMap;
use std::time::Duration;

use hermes_core::CancellationToken;
use hermes_core::time::unix_now;
use hermes_core::{CatchUp, CronEntry, CronSchedule, Driver, Emitter, Scheduler};

use super::scenarios::{ack, open};
use super::{Harness, Outcome};

/// How many ticks the scenario watches.
const TICKS: usize = 10;

/// Three schedulers, each on its own instance (as three processes), run one entry with a
/// 1-second cron for ten ticks: exactly ten messages are queued, one per tick, with the ids
/// the entry's name and the ticks give.
pub async fn three_schedulers_emit_one_message_per_tick<H: Harness>(h: &H, queue: &str) -> Outcome {
    let consumer = open(h, queue).await;
    if !consumer.capabilities().unique {
        return Outcome::lacks("unique");
    }
    let entry = CronEntry::new(
        "every-second",
        CronSchedule::new("* * * * * *", "Europe/Bratislava").expect("a schedule"),
        "tick",
    );
    // Start half way between two ticks, so that exactly TICKS ticks fall in the run.
    let start = unix_now().ceil() + 0.5;
    tokio::time::sleep(Duration::from_secs_f64((start - unix_now()).max(0.0))).await;
    let stop = CancellationToken::new();
    let mut running = Vec::new();
    for _ in 0..3 {
        let scheduler = Scheduler::new(Emitter::new(open(h, queue).await)).catch_up(CatchUp::None);
        scheduler.add(entry.clone()).expect("the entry");
        let stop = stop.clone();
        running.push(tokio::spawn(async move { scheduler.run(stop).await }));
    }
    let end = start + TICKS as f64;
    tokio::time::sleep(Duration::from_secs_f64((end - unix_now()).max(0.0))).await;
    stop.cancel();
    for scheduler in running {
        scheduler
            .await
            .expect("a scheduler task")
            .expect("a scheduler run");
    }

    let mut ids: BTreeMap<String, usize> = BTreeMap::new();
    while let Some(delivery) = consumer
        .receive(&[], Duration::from_millis(500))
        .await
        .expect("receiving")
    {
        *ids.entry(delivery.message().id().to_owned()).or_default() += 1;
        ack(&consumer, &delivery).await;
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
    Outcome::Passed
}
