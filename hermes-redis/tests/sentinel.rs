//! Redis watched by Sentinel (a master, a replica and three sentinels of the test's own): under
//! a busy worker and an emitter, the master is SIGKILLed, and both go on against the promoted
//! replica, on both client libraries, with no restart. Each run prints how long emits and
//! handling paused and how many acknowledged messages were lost; with the replica wait on,
//! none may be.
//!
//! Once the replica was promoted, an empty server takes the place of the killed master as the
//! new master's replica: with the replica wait on, emits need a replica to return.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::sentinel_group::SentinelGroup;
use hermes_core::{DEFAULT_PRIORITY, Dispatcher, DispatcherOptions, Driver, Message, handler_fn};
use hermes_redis::RedisSetDriver;

/// What one failover cost.
#[derive(Debug)]
struct Figures {
    /// From the kill until every sentinel named the new master.
    promoted_after: Duration,
    /// The longest time between two emits that returned `Ok`.
    emits_paused: Duration,
    /// The longest time between two messages handled.
    handling_paused: Duration,
    acknowledged: usize,
    /// Emits that returned `Ok` after the new master had a replica again.
    acknowledged_after: usize,
    lost: usize,
    /// Of those lost, how many were emitted after the new master had a replica again.
    lost_after: usize,
    handled_twice: usize,
}

/// Times of `Ok` emits (`(id, when)`) and of handlings.
#[derive(Default)]
struct Record {
    emitted: Mutex<Vec<(u64, Instant)>>,
    handled: Mutex<Vec<(u64, Instant)>>,
}

/// The longest gap between two times of `times`.
fn longest_gap(mut times: Vec<Instant>) -> Duration {
    times.sort();
    times
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default()
}

async fn fail_over(client: &str, replica_wait: bool) -> Figures {
    let key = format!("failover-{client}-{replica_wait}");
    let mut group = tokio::task::block_in_place(SentinelGroup::start);
    let wait = if replica_wait {
        "&replica_wait=1&replica_wait_timeout=0.5"
    } else {
        ""
    };
    let url = group.url(
        client,
        &format!("&key={key}&schedule_key={key}_schedule&visibility_timeout=3{wait}"),
    );
    let emitter = RedisSetDriver::from_url(&url).await.expect("the master");
    let worker = RedisSetDriver::from_url(&url).await.expect("the master");
    let record = Arc::new(Record::default());

    let mut options = DispatcherOptions::default();
    options.concurrency = 4;
    options.max_error_backoff = Duration::from_millis(200);
    options.poll_wait = Duration::from_millis(500);
    let mut dispatcher = Dispatcher::new(worker).options(options);
    let handled = record.clone();
    dispatcher.register_handler(
        "failover",
        Arc::new(handler_fn(move |m: Message| {
            let handled = handled.clone();
            async move {
                let [i]: [u64; 1] = m.payload_as().expect("a number");
                handled.lock_handled().push((i, Instant::now()));
                Ok(true)
            }
        })),
    );
    let stop_worker = dispatcher.cancellation_token();
    let working = tokio::spawn(async move { dispatcher.handle(&[]).await });

    // Two emit loops, about 1,000 messages a second each; an emit that fails is not counted
    // and the next message goes.
    let emitting = Arc::new(AtomicBool::new(true));
    let next = Arc::new(AtomicU64::new(0));
    let mut emitters = Vec::new();
    for _ in 0..2 {
        let (emitter, record, emitting, next) = (
            emitter.clone(),
            record.clone(),
            emitting.clone(),
            next.clone(),
        );
        emitters.push(tokio::spawn(async move {
            while emitting.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let message = Message::builder("failover").payload(&[i]).build().unwrap();
                match emitter.send(&message, DEFAULT_PRIORITY).await {
                    Ok(()) => record.lock_emitted().push((i, Instant::now())),
                    Err(e) => assert!(e.is_temporary(), "a failover is temporary: {e}"),
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }));
    }

    tokio::time::sleep(Duration::from_secs(1)).await;
    let (old, killed) = group.kill_master();
    let new = tokio::task::block_in_place(|| group.wait_for_failover(old, Duration::from_secs(20)));
    let promoted_after = killed.elapsed();
    tokio::task::block_in_place(|| {
        group.start_replica(new);
        group.wait_for_replica(new, Duration::from_secs(30));
    });
    let recovered = Instant::now();
    // Emits go on for 1.5 s against the new master.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    emitting.store(false, Ordering::Relaxed);
    for emitter in emitters {
        emitter.await.expect("an emit loop panicked");
    }

    // The worker handles what is left; lost messages never come.
    let emitted: BTreeSet<u64> = record.lock_emitted().iter().map(|(i, _)| *i).collect();
    let drained = Instant::now();
    let mut last_count = 0;
    let mut last_change = Instant::now();
    loop {
        let count = record.lock_handled().len();
        let all = {
            let handled: BTreeSet<u64> = record.lock_handled().iter().map(|(i, _)| *i).collect();
            emitted.is_subset(&handled)
        };
        if count != last_count {
            last_count = count;
            last_change = Instant::now();
        }
        // Claims lost with the old master come back after the visibility timeout (3 s).
        if all || last_change.elapsed() > Duration::from_secs(5) {
            break;
        }
        assert!(
            drained.elapsed() < Duration::from_secs(60),
            "still handling"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop_worker.cancel();
    working
        .await
        .expect("the worker panicked")
        .expect("the worker went on through the failover");

    let emitted_times = record.lock_emitted().clone();
    let handled_times = record.lock_handled().clone();
    let handled: BTreeSet<u64> = handled_times.iter().map(|(i, _)| *i).collect();
    assert!(
        handled.is_subset(&(0..next.load(Ordering::Relaxed)).collect()),
        "only emitted messages are handled"
    );
    let lost: Vec<(u64, Instant)> = emitted_times
        .iter()
        .filter(|(i, _)| !handled.contains(i))
        .copied()
        .collect();
    let figures = Figures {
        promoted_after,
        emits_paused: longest_gap(emitted_times.iter().map(|(_, t)| *t).collect()),
        handling_paused: longest_gap(handled_times.iter().map(|(_, t)| *t).collect()),
        acknowledged: emitted_times.len(),
        acknowledged_after: emitted_times.iter().filter(|(_, t)| *t > recovered).count(),
        lost: lost.len(),
        lost_after: lost.iter().filter(|(_, t)| *t > recovered).count(),
        handled_twice: handled_times.len() - handled.len(),
    };
    println!(
        "Sentinel failover, client {client}, replica wait {}: promoted {:.2} s after the kill; \
         emits paused {:.2} s, handling paused {:.2} s; {} emits acknowledged, {} lost, {} \
         handled twice",
        if replica_wait { "on" } else { "off" },
        figures.promoted_after.as_secs_f64(),
        figures.emits_paused.as_secs_f64(),
        figures.handling_paused.as_secs_f64(),
        figures.acknowledged,
        figures.lost,
        figures.handled_twice,
    );
    assert!(
        figures.acknowledged_after > 100,
        "emits went on against the new master: {figures:?}"
    );
    assert_eq!(
        figures.lost_after, 0,
        "what the new master acknowledged is handled: {figures:?}"
    );
    assert!(
        figures.emits_paused < Duration::from_secs(30),
        "{figures:?}"
    );
    figures
}

impl Record {
    fn lock_emitted(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Instant)>> {
        self.emitted.lock().unwrap()
    }

    fn lock_handled(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Instant)>> {
        self.handled.lock().unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_rs_follows_a_failover() {
    fail_over("redis", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_rs_with_the_replica_wait_loses_nothing_in_a_failover() {
    let figures = fail_over("redis", true).await;
    assert_eq!(figures.lost, 0, "{figures:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fred_follows_a_failover() {
    fail_over("fred", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fred_with_the_replica_wait_loses_nothing_in_a_failover() {
    let figures = fail_over("fred", true).await;
    assert_eq!(figures.lost, 0, "{figures:?}");
}
