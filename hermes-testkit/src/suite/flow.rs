//! Scenarios of flow control: a concurrency limit and a rate across workers, a dead holder's
//! slot, snoozing, pausing and resuming, cancelling. Each needs the driver's `limits` or
//! `controls` facet (snoozing needs delays) and is skipped without it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_core::flow::{Admission, Bound, Limits, PauseTarget, Rate, Snooze};
use hermes_core::inspect::DeadKind;
use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, Driver, Emitter, HandlerError, Job, JobContext, Message,
    RetryPolicy, handler_fn,
};
use serde::{Deserialize, Serialize};

use super::processes::{Notes, Running, Workers, micros_now, serve_as_copy};
use super::support::{PATIENCE, message, open, scaled};
use super::{Harness, Outcome};
use crate::most_at_once;

/// Waits until `done` holds, checking every 20 ms, for at most `within`; whether it does.
async fn wait_for(within: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// The limit of the concurrency scenario: at most 2 `limited` jobs at once.
const LIMITED: Limits = Limits::new().concurrency(2);

/// A worker of the concurrency scenario: eight jobs at once, [`LIMITED`], each run taking
/// 100 ms and noted as `<id> <start µs> <end µs>`.
fn limited_worker<D: Driver>(driver: D, notes: Notes) -> Dispatcher {
    let mut dispatcher = Dispatcher::new(driver).concurrency(8);
    dispatcher.limit("limited", LIMITED).expect("the limit");
    dispatcher.register_handler(
        "limited",
        handler_fn(move |m: Message| {
            let notes = notes.clone();
            async move {
                let start = micros_now();
                tokio::time::sleep(Duration::from_millis(100)).await;
                notes.push(format!("{} {start} {}", m.id(), micros_now()));
                Ok(true)
            }
        }),
    );
    dispatcher
}

/// Three workers in processes of their own (in this process where the backend lives in it),
/// eight jobs at once each, and a limit of 2 on the type: the handlers' spans never overlap
/// more than 2 deep, they do reach 2, every job runs once, and no slot is held afterwards.
pub async fn a_concurrency_limit_holds_across_workers<H: Harness>(h: &H, queue: &str) -> Outcome {
    if serve_as_copy(h, queue, limited_worker).await {
        return Outcome::Passed;
    }
    let first = open(h, queue).await;
    if first.limits().is_none() {
        return Outcome::lacks_facet("limits");
    }
    let n = scaled(h, 24);
    let emitter = Emitter::new(first);
    for i in 0..n {
        emitter
            .emit(&message("limited", i), DEFAULT_PRIORITY)
            .await
            .expect("an emit");
    }
    let (workers, notes) = Workers::start(h, queue, 3, limited_worker).await;
    let all = wait_for(Duration::from_secs(120), || notes.read().len() >= n).await;
    let place = if workers.are_copies() {
        "in three processes"
    } else {
        "in this process"
    };
    workers.stop().await;
    let runs: Vec<(String, u64, u64)> = notes
        .read()
        .iter()
        .map(|line| {
            let mut fields = line.split(' ');
            let mut next = || fields.next().expect("a field of a run's note");
            let id = next().to_owned();
            let start = next().parse().expect("a start");
            let end = next().parse().expect("an end");
            (id, start, end)
        })
        .collect();
    assert!(all, "{} of {n} jobs ran within 120 s", runs.len());
    let unique: HashSet<&String> = runs.iter().map(|(id, _, _)| id).collect();
    assert_eq!(unique.len(), runs.len(), "a job ran twice");
    assert_eq!(
        most_at_once(runs.iter().map(|(_, start, end)| (*start, *end))),
        2,
        "the most jobs running at once, workers {place}"
    );
    let store = emitter.driver().limits().expect("the limits facet");
    for bound in LIMITED.bounds("limited", None) {
        assert_eq!(
            store.usage(&bound).await.expect("the usage"),
            0,
            "{bound:?}"
        );
    }
    Outcome::Passed
}

/// 200 jobs under a rate of 10 a second, on three workers of eight: every job runs, and no
/// window of a second holds more than 10 starts (measured by the handlers, so with a margin of
/// 100 ms for the time from an admission to its handler's first line, longer on a loaded
/// machine; a rate kept per process would let 30 in).
pub async fn a_rate_holds_in_every_window<H: Harness>(h: &H, queue: &str) -> Outcome {
    rate_holds(h, queue, Rate::per_second(10), scaled(h, 200)).await
}

/// 800 jobs under a rate of 200 per 500 ms, on three workers of eight, where workers record
/// starts ahead in batches: every job runs, and no window of 400 ms holds more than 200 starts
/// (measured by the handlers, with the same margin of 100 ms).
pub async fn a_fast_rate_holds_in_every_window<H: Harness>(h: &H, queue: &str) -> Outcome {
    let rate = Rate::new(200, Duration::from_millis(500));
    rate_holds(h, queue, rate, scaled(h, 800)).await
}

/// `n` jobs under `rate` on three workers of eight: every job runs, and no window of the
/// rate's period less 100 ms holds more than the rate's number of starts.
async fn rate_holds<H: Harness>(h: &H, queue: &str, rate: Rate, n: usize) -> Outcome {
    let first = open(h, queue).await;
    if first.limits().is_none() {
        return Outcome::lacks_facet("limits");
    }
    let emitter = Emitter::new(first);
    let messages: Vec<Message> = (0..n).map(|i| message("rated", i)).collect();
    emitter
        .emit_batch(&messages, DEFAULT_PRIORITY)
        .await
        .expect("the batch");
    let starts: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let ran: Arc<Mutex<std::collections::HashSet<String>>> = Arc::default();
    let mut workers = Vec::new();
    for _ in 0..3 {
        let mut dispatcher = Dispatcher::new(open(h, queue).await).concurrency(8);
        dispatcher
            .limit("rated", Limits::new().rate(rate))
            .expect("the rate");
        let starts = starts.clone();
        let ran = ran.clone();
        dispatcher.register_handler(
            "rated",
            handler_fn(move |m: Message| {
                let starts = starts.clone();
                let ran = ran.clone();
                async move {
                    starts.lock().unwrap().push(Instant::now());
                    ran.lock().unwrap().insert(m.id().to_owned());
                    Ok(true)
                }
            }),
        );
        workers.push(Running::start(dispatcher));
    }
    let all = wait_for(Duration::from_secs(90), || ran.lock().unwrap().len() >= n).await;
    for worker in workers {
        worker.stop().await;
    }
    let ran = ran.lock().unwrap().len();
    let mut starts = starts.lock().unwrap().clone();
    assert!(all, "{ran} of {n} jobs ran within 90 s");
    // At least once: a claim that expired on a loaded machine may run a job again (each run
    // is admitted, so it counts against the rate like any start). A stall of the backend longer
    // than a short claim's lease re-runs what each worker held then (up to its prefetch and its
    // running jobs), so a tenth of the jobs at most; a driver that ran every job twice fails.
    assert!(
        starts.len() - ran <= n / 10,
        "{} runs of {n} jobs: more ran twice than a claim's expiry explains",
        starts.len()
    );
    starts.sort();
    let window = rate.period() - Duration::from_millis(100);
    let most = rate.max() as usize;
    for (i, from) in starts.iter().enumerate() {
        let within = starts[i..]
            .iter()
            .take_while(|t| **t - *from < window)
            .count();
        assert!(
            within <= most,
            "{within} starts within {window:?} of start #{i}, more than the rate allows"
        );
    }
    Outcome::Passed
}

/// Starts recorded ahead in batches
/// ([`admit_starts`](hermes_core::driver::LimitStore::admit_starts)) fill a rate exactly: the
/// batches asked for until a refusal add up to the rate (never more, never a batch over the
/// number asked for), [`usage`](hermes_core::driver::LimitStore::usage) counts each start, and
/// the refusal names when the rate has room; under two rates the tighter one decides.
pub async fn starts_recorded_ahead_fill_a_rate_exactly<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let Some(store) = driver.limits() else {
        return Outcome::lacks_facet("limits");
    };
    // Long enough that no start leaves the window while the rates fill, however slow the
    // backend answers.
    let period = Duration::from_secs(60);
    let within = Duration::from_millis(50);
    let rate = |name: &str, max: u32| Bound::Starts {
        name: format!("{queue}-{name}"),
        rate: Rate::new(max, period),
    };
    let fill = |bounds: Vec<Bound>| async move {
        let mut recorded = 0;
        for call in 0..200 {
            let (admission, n) = store
                .admit_starts(&format!("h{call}"), &bounds, 10, within)
                .await
                .expect("an admission");
            match admission {
                Admission::Admitted => {
                    assert!((1..=10).contains(&n), "{n} starts recorded, 1 to 10 asked");
                    recorded += n;
                }
                Admission::Refused { retry_after, .. } => {
                    assert_eq!(n, 0, "a refusal recorded starts");
                    let after = retry_after.expect("a full rate says when it has room");
                    assert!(after <= period + within, "room again in {after:?}");
                    return recorded;
                }
                other => panic!("an admission: {other:?}"),
            }
        }
        panic!("a rate never filled");
    };
    let wide = rate("wide", 100);
    assert_eq!(
        fill(vec![wide.clone()]).await,
        100,
        "starts under a rate of 100"
    );
    assert_eq!(store.usage(&wide).await.expect("the usage"), 100);
    let (loose, tight) = (rate("loose", 100), rate("tight", 7));
    assert_eq!(
        fill(vec![loose.clone(), tight.clone()]).await,
        7,
        "starts under rates of 100 and 7"
    );
    assert_eq!(store.usage(&tight).await.expect("the usage"), 7);
    assert_eq!(store.usage(&loose).await.expect("the usage"), 7);
    Outcome::Passed
}

/// A slot whose holder died (never released, never renewed) is free once its lease ends, and
/// not before; a renewed slot stays held; a released one is free at once; a full rate names
/// when it has room again.
pub async fn a_dead_holders_slot_frees_after_its_lease<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let Some(store) = driver.limits() else {
        return Outcome::lacks_facet("limits");
    };
    let lease = Duration::from_millis(1500);
    let slot = |name: &str| Bound::Slots {
        name: format!("{queue}-{name}"),
        max: 1,
    };
    let admit = |holder: &'static str, bound: Bound| async move {
        store
            .admit(holder, &[bound], lease)
            .await
            .expect("an admission")
    };
    let (dead, renewed) = (slot("dead"), slot("renewed"));
    assert_eq!(admit("a", dead.clone()).await, Admission::Admitted);
    assert_eq!(admit("c", renewed.clone()).await, Admission::Admitted);
    assert!(
        matches!(
            admit("b", dead.clone()).await,
            Admission::Refused {
                retry_after: None,
                ..
            }
        ),
        "a full slot refuses another holder"
    );
    assert_eq!(
        admit("a", dead.clone()).await,
        Admission::Admitted,
        "its holder again"
    );
    tokio::time::sleep(lease / 2).await;
    store
        .renew("c", &[renewed.name().to_owned()], lease)
        .await
        .expect("a renewal");
    tokio::time::sleep(lease / 2 + Duration::from_millis(300)).await;
    assert_eq!(
        admit("b", dead.clone()).await,
        Admission::Admitted,
        "the dead holder's lease ended"
    );
    assert_eq!(store.usage(&dead).await.expect("the usage"), 1);
    assert!(
        matches!(admit("d", renewed.clone()).await, Admission::Refused { .. }),
        "a renewed slot stays held"
    );
    store
        .release("c", &[renewed.name().to_owned()])
        .await
        .expect("a release");
    assert_eq!(admit("d", renewed).await, Admission::Admitted, "released");

    let rate = Bound::Starts {
        name: format!("{queue}-rate"),
        rate: Rate::new(2, Duration::from_secs(2)),
    };
    for holder in ["x", "y"] {
        assert_eq!(admit(holder, rate.clone()).await, Admission::Admitted);
    }
    match admit("z", rate.clone()).await {
        Admission::Refused {
            retry_after: Some(after),
            ..
        } => assert!(
            after > Duration::from_millis(1000) && after <= Duration::from_secs(2),
            "the first start leaves the window in {after:?}"
        ),
        other => panic!("a full rate: {other:?}"),
    }
    assert_eq!(store.usage(&rate).await.expect("the usage"), 2);
    Outcome::Passed
}

/// A handler that snoozes for a second runs again a second later, its retries unchanged,
/// without a retry policy, and the message is not a dead letter.
pub async fn a_snoozed_job_runs_again_with_its_retries<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    if !driver.capabilities().delay {
        return Outcome::lacks("delay");
    }
    let runs: Arc<Mutex<Vec<(u32, Instant)>>> = Arc::default();
    let mut dispatcher = Dispatcher::new(open(h, queue).await);
    let record = runs.clone();
    dispatcher.register_handler(
        "snoozing",
        handler_fn(move |m: Message| {
            let record = record.clone();
            async move {
                let first = {
                    let mut runs = record.lock().unwrap();
                    runs.push((m.retries(), Instant::now()));
                    runs.len() == 1
                };
                if first {
                    return Err(HandlerError::from(Snooze::new(Duration::from_secs(1))));
                }
                Ok(true)
            }
        }),
    );
    let worker = Running::start(dispatcher);
    let emitter = Emitter::new(driver);
    let sent = Message::builder("snoozing")
        .retries(2)
        .build()
        .expect("a message");
    emitter
        .emit(&sent, DEFAULT_PRIORITY)
        .await
        .expect("an emit");
    let twice = wait_for(PATIENCE, || runs.lock().unwrap().len() >= 2).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    worker.stop().await;
    let runs = runs.lock().unwrap().clone();
    assert!(twice, "runs: {}", runs.len());
    assert_eq!(runs.len(), 2, "it ran again once");
    assert_eq!(
        (runs[0].0, runs[1].0),
        (2, 2),
        "the retries stay as they were"
    );
    let gap = runs[1].1 - runs[0].1;
    assert!(
        gap >= Duration::from_millis(950),
        "it ran again after {gap:?}"
    );
    if let Some(dead) = emitter.driver().dead_letters() {
        let letters = dead
            .list(DEFAULT_PRIORITY, 10)
            .await
            .expect("the dead letters");
        assert!(letters.is_empty(), "a snooze is no failure: {letters:?}");
    }
    Outcome::Passed
}

/// Pausing the default queue stops new starts within a second and keeps its messages;
/// resuming starts them within a second. Pausing a type does the same for its messages only.
pub async fn pausing_stops_new_starts_and_resuming_restarts_them<H: Harness>(
    h: &H,
    queue: &str,
) -> Outcome {
    let driver = open(h, queue).await;
    if driver.controls().is_none() {
        return Outcome::lacks_facet("controls");
    }
    let handled: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let mut dispatcher = Dispatcher::new(open(h, queue).await).concurrency(2);
    for message_type in ["plain", "paused-type"] {
        let record = handled.clone();
        dispatcher.register_handler(
            message_type,
            handler_fn(move |m: Message| {
                let record = record.clone();
                async move {
                    record
                        .lock()
                        .unwrap()
                        .push((m.id().to_owned(), Instant::now()));
                    Ok(true)
                }
            }),
        );
    }
    let worker = Running::start(dispatcher);
    let emitter = Emitter::new(driver);
    let ran = |id: &str| {
        handled
            .lock()
            .unwrap()
            .iter()
            .find(|(h, _)| h == id)
            .map(|(_, at)| *at)
    };
    let emit = |message_type: &'static str| {
        let emitter = &emitter;
        async move {
            let m = Message::new(message_type);
            emitter.emit(&m, DEFAULT_PRIORITY).await.expect("an emit");
            m
        }
    };
    let first = emit("plain").await;
    assert!(
        wait_for(PATIENCE, || ran(first.id()).is_some()).await,
        "a job before the pause"
    );

    // The queue.
    let the_queue = PauseTarget::Priority(DEFAULT_PRIORITY);
    emitter.pause(&the_queue).await.expect("a pause");
    assert_eq!(
        emitter.paused().await.expect("the pauses"),
        std::slice::from_ref(&the_queue)
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let held = emit("plain").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(ran(held.id()).is_none(), "a job started on a paused queue");
    if let Some(inspect) = emitter.driver().inspect() {
        let stats = inspect.stats().await.expect("the stats");
        // Waiting, or held unstarted by a worker's prefetch (in flight on a broker).
        let held = stats
            .iter()
            .find(|s| s.priority == DEFAULT_PRIORITY)
            .and_then(|s| Some(s.waiting.value()? + s.in_flight.value()?));
        assert!(
            held.is_none_or(|held| held >= 1),
            "a paused queue keeps its jobs: {held:?}"
        );
    }
    let resumed = Instant::now();
    assert!(emitter.resume(&the_queue).await.expect("a resume"));
    assert!(
        wait_for(PATIENCE, || ran(held.id()).is_some()).await,
        "the held job never ran after the resume"
    );
    let after = ran(held.id()).expect("its start") - resumed;
    assert!(
        after <= Duration::from_millis(1500),
        "it started {after:?} after the resume"
    );

    // A type.
    let the_type = PauseTarget::Type("paused-type".into());
    emitter.pause(&the_type).await.expect("a pause");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let parked = emit("paused-type").await;
    let other = emit("plain").await;
    assert!(
        wait_for(PATIENCE, || ran(other.id()).is_some()).await,
        "another type runs while one is paused"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(ran(parked.id()).is_none(), "a job of a paused type started");
    let resumed = Instant::now();
    assert!(emitter.resume(&the_type).await.expect("a resume"));
    assert!(
        wait_for(PATIENCE, || ran(parked.id()).is_some()).await,
        "the parked job never ran after the resume"
    );
    let after = ran(parked.id()).expect("its start") - resumed;
    assert!(
        after <= Duration::from_secs(4),
        "it started {after:?} after the resume"
    );
    assert!(emitter.paused().await.expect("the pauses").is_empty());
    worker.stop().await;
    Outcome::Passed
}

/// A job that waits for its cancellation token (retried on failure, to show a cancelled run
/// is not).
#[derive(Serialize, Deserialize)]
struct Long {}

impl Job for Long {
    const TYPE: &'static str = "long";

    fn retry_policy() -> Option<RetryPolicy> {
        Some(RetryPolicy::fixed(Duration::from_millis(100), 3))
    }
}

/// A worker of the cancellation scenario: two jobs at once, noting `handled <id>` for each
/// `plain` job, and for a [`Long`] one `started`, then `fired <µs>` when its token fires.
fn cancellable_worker<D: Driver>(driver: D, notes: Notes) -> Dispatcher {
    let mut dispatcher = Dispatcher::new(driver).concurrency(2);
    let record = notes.clone();
    dispatcher.register_handler(
        "plain",
        handler_fn(move |m: Message| {
            let record = record.clone();
            async move {
                record.push(format!("handled {}", m.id()));
                Ok(true)
            }
        }),
    );
    dispatcher.register_job(move |_: Long, ctx: JobContext| {
        let notes = notes.clone();
        async move {
            notes.push("started".to_owned());
            tokio::select! {
                () = ctx.cancelled() => {
                    notes.push(format!("fired {}", micros_now()));
                    Err("stopped: cancelled")
                }
                () = tokio::time::sleep(Duration::from_secs(30)) => Ok(()),
            }
        }
    });
    dispatcher
}

/// A waiting job cancelled from another instance never runs and is kept as cancelled (where
/// dead letters are kept); a job running in another process (in this one where the backend
/// lives in it), cancelled from here, sees its token fire within a second, and is neither
/// retried nor dead.
pub async fn cancelling_stops_waiting_and_running_jobs<H: Harness>(h: &H, queue: &str) -> Outcome {
    if serve_as_copy(h, queue, cancellable_worker).await {
        return Outcome::Passed;
    }
    let driver = open(h, queue).await;
    if driver.controls().is_none() {
        return Outcome::lacks_facet("controls");
    }
    let emitter = Emitter::new(driver);
    let canceller = Emitter::new(open(h, queue).await);
    let waiting = Message::new("plain");
    emitter
        .emit(&waiting, DEFAULT_PRIORITY)
        .await
        .expect("an emit");
    canceller
        .cancel(waiting.id(), "the suite")
        .await
        .expect("a cancellation");

    let (worker, notes) = Workers::start(h, queue, 1, cancellable_worker).await;
    let notes = &notes;
    let has = |line: String| move || notes.read().contains(&line);
    let after = Message::new("plain");
    emitter
        .emit(&after, DEFAULT_PRIORITY)
        .await
        .expect("an emit");
    assert!(
        wait_for(PATIENCE * 2, has(format!("handled {}", after.id()))).await,
        "the job after the cancelled one never ran"
    );
    assert!(
        !has(format!("handled {}", waiting.id()))(),
        "a cancelled job ran"
    );
    if let Some(dead) = emitter.driver().dead_letters() {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let letters = dead
                .list(DEFAULT_PRIORITY, 100)
                .await
                .expect("the dead letters");
            let kept = letters.iter().any(|l| {
                l.message.as_ref().is_some_and(|m| m.id() == waiting.id())
                    && l.reason.kind == DeadKind::Cancelled
                    && l.reason.error.contains("the suite")
            });
            if kept {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the cancelled job is kept as cancelled, with who asked: {letters:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    let starts = || notes.read().iter().filter(|l| *l == "started").count();
    let fired = || {
        notes.read().iter().find_map(|l| {
            l.strip_prefix("fired ")
                .map(|at| at.parse::<u64>().expect("a time"))
        })
    };
    let long = Message::from_job(&Long {}).expect("a job");
    emitter
        .emit(&long, DEFAULT_PRIORITY)
        .await
        .expect("an emit");
    assert!(
        wait_for(PATIENCE, || starts() == 1).await,
        "the long job never started"
    );
    let asked = micros_now();
    canceller
        .cancel(long.id(), "the suite")
        .await
        .expect("a cancellation");
    assert!(
        wait_for(Duration::from_secs(5), || fired().is_some()).await,
        "the running job's token never fired"
    );
    let took = Duration::from_micros(fired().expect("fired").saturating_sub(asked));
    assert!(
        took <= Duration::from_millis(1200),
        "the token fired {took:?} after the request"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    worker.stop().await;
    assert_eq!(starts(), 1, "a cancelled run is not retried");
    if let Some(dead) = emitter.driver().dead_letters() {
        let letters = dead
            .list(DEFAULT_PRIORITY, 100)
            .await
            .expect("the dead letters");
        assert!(
            !letters
                .iter()
                .any(|l| l.message.as_ref().is_some_and(|m| m.id() == long.id())),
            "a cancelled run is not dead"
        );
    }
    Outcome::Passed
}
