//! A scheduler's entries change while it runs: a removed entry stops emitting, an added one
//! starts, an entry added under a taken name replaces it; a missed tick is caught up once.

use std::time::Duration;

use hermes_core::cron::CronSchedule;
use hermes_core::time::unix_now;
use hermes_core::{CatchUp, CronEntry, Emitter, Scheduler};
use hermes_testkit::MemoryDriver;

fn every_second(name: &str, message_type: &str) -> CronEntry {
    CronEntry::new(
        name,
        CronSchedule::new("* * * * * *", "UTC").unwrap(),
        message_type,
    )
}

/// Runs `scheduler` for `time`, then stops it.
async fn run_for(scheduler: &Scheduler, time: Duration) {
    let stop = hermes_core::CancellationToken::new();
    let run = tokio::spawn({
        let scheduler = scheduler.clone();
        let stop = stop.clone();
        async move { scheduler.run(stop).await }
    });
    tokio::time::sleep(time).await;
    stop.cancel();
    run.await.unwrap().unwrap();
}

/// The types of the messages on `driver`'s queue, in order.
fn queued_types(driver: &MemoryDriver) -> Vec<String> {
    driver
        .queued_messages()
        .into_iter()
        .map(|(_, m)| m.message_type().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_change_while_it_runs() {
    let driver = MemoryDriver::new();
    let scheduler = Scheduler::new(Emitter::new(driver.clone())).catch_up(CatchUp::None);
    scheduler.add(every_second("a", "first")).unwrap();
    let stop = hermes_core::CancellationToken::new();
    let run = tokio::spawn({
        let scheduler = scheduler.clone();
        let stop = stop.clone();
        async move { scheduler.run(stop).await }
    });
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let first = queued_types(&driver).len();
    assert!(
        (2..=3).contains(&first),
        "two or three ticks in 2.5 s: {first}"
    );

    assert!(scheduler.remove("a"));
    assert!(!scheduler.remove("a"), "removed already");
    scheduler.add(every_second("b", "second")).unwrap();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let types = queued_types(&driver);
    assert!(
        types[first..].iter().all(|t| t == "second") && types.len() - first >= 2,
        "after the change only the new entry emits: {types:?}"
    );
    assert_eq!(scheduler.status().len(), 1);
    assert_eq!(scheduler.status()[0].entry.name(), "b");

    // The same name again replaces the entry.
    scheduler.add(every_second("b", "third")).unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        queued_types(&driver).last().map(String::as_str),
        Some("third")
    );
    stop.cancel();
    run.await.unwrap().unwrap();
    assert!(scheduler.add(every_second("bad name", "x")).is_err());
}

#[tokio::test]
async fn the_last_missed_tick_is_caught_up_once_and_only_it() {
    let driver = MemoryDriver::new();
    // A yearly entry: its last tick passed months ago, and the next one is far.
    let yearly = CronEntry::new(
        "yearly",
        CronSchedule::new("0 0 1 1 *", "UTC").unwrap(),
        "report",
    );
    let last_tick = yearly.schedule().last_at_or_before(unix_now()).unwrap();
    for _ in 0..2 {
        // Two schedulers start one after the other: the tick is emitted once.
        let scheduler = Scheduler::new(Emitter::new(driver.clone()));
        scheduler.add(yearly.clone()).unwrap();
        run_for(&scheduler, Duration::from_millis(300)).await;
        assert_eq!(scheduler.status()[0].previous, Some(last_tick));
    }
    let queued = driver.queued_messages();
    assert_eq!(queued.len(), 1, "the last tick once");
    assert_eq!(
        queued[0].1.id(),
        format!("cron-yearly-{}", last_tick as i64)
    );

    // Under CatchUp::None nothing of the past is emitted.
    let none = MemoryDriver::new();
    let scheduler = Scheduler::new(Emitter::new(none.clone())).catch_up(CatchUp::None);
    scheduler.add(yearly).unwrap();
    run_for(&scheduler, Duration::from_millis(300)).await;
    assert!(none.is_empty());
}

#[tokio::test]
async fn all_ticks_within_the_window_are_caught_up() {
    let driver = MemoryDriver::new();
    let scheduler = Scheduler::new(Emitter::new(driver.clone()))
        .catch_up(CatchUp::AllWithin(Duration::from_millis(3_500)));
    let now = unix_now();
    scheduler.add(every_second("s", "tick")).unwrap();
    run_for(&scheduler, Duration::from_millis(200)).await;
    let ids: Vec<String> = driver
        .queued_messages()
        .into_iter()
        .map(|(_, m)| m.id().to_owned())
        .collect();
    // The ticks in the 3.5 s before `now`: three, or four when `now` is just past a tick.
    let past: Vec<String> = (0..4)
        .map(|i| (now.floor() as i64) - i)
        .filter(|tick| (*tick as f64) > now - 3.5)
        .map(|tick| format!("cron-s-{tick}"))
        .rev()
        .collect();
    assert!(
        ids.starts_with(&past),
        "the missed ticks in order: {ids:?}, want {past:?}"
    );
}
