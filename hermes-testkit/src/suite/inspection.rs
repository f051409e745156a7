//! Scenarios of inspection and dead letters, run on drivers that declare them.

use std::sync::Arc;
use std::time::Duration;

use hermes_core::driver::{Delivery, Inspect};
use hermes_core::inspect::{DeadKind, DeadReason, Figure, QueueState, QueueStats, Replay};
use hermes_core::workers::{RunningMessage, WorkerInfo};
use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, DispatcherOptions, Driver, HandlerError, Message, handler_fn,
};
use serde_json::json;

use super::scenarios::{PATIENCE, ack, message, open, send};
use super::{Harness, Outcome};

/// The figures of the default queue.
async fn default_stats(inspect: &dyn Inspect) -> QueueStats {
    let stats = inspect.stats().await.expect("stats");
    stats
        .into_iter()
        .find(|s| s.priority == DEFAULT_PRIORITY)
        .expect("the default queue in the stats")
}

/// Checks that `figure` is `want`: exactly when the driver says it is exact, within the
/// approximation when it says it is approximate (no further than 1 off), and anything when it
/// says it cannot tell.
fn assert_count(figure: Figure<u64>, want: u64, what: &str) {
    match figure {
        Figure::Exact(got) => assert_eq!(got, want, "{what}"),
        Figure::Approximate(got) => {
            assert!(got.abs_diff(want) <= 1, "{what}: {got}, want about {want}");
        }
        _ => {}
    }
}

async fn claim(driver: &impl Driver) -> Delivery {
    driver
        .receive(&[], PATIENCE)
        .await
        .expect("receive")
        .expect("a message")
}

/// After known sends, a claim, delays and a dead letter, the figures of the queue match: 2
/// waiting, 2 delayed, 1 in flight, 1 dead; the latency of a queue whose oldest message has
/// waited a second is at least that second, and zero once the queue is empty.
pub async fn stats_count_every_state<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let Some(inspect) = driver.inspect() else {
        return Outcome::lacks_facet("inspect");
    };
    let empty = default_stats(inspect).await;
    assert_count(empty.waiting, 0, "waiting when empty");
    if let Figure::Exact(latency) = empty.latency {
        assert_eq!(latency, Duration::ZERO, "empty latency");
    }
    for n in 0..4 {
        send(&driver, &message("counted", n), DEFAULT_PRIORITY).await;
    }
    for n in 0..2 {
        let delayed = Message::builder("counted")
            .payload(&json!({ "n": 10 + n }))
            .delay(Duration::from_secs(600))
            .build()
            .expect("a message");
        send(&driver, &delayed, DEFAULT_PRIORITY).await;
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let held = claim(&driver).await;
    let dead = if let Some(dead_letters) = driver.dead_letters() {
        let doomed = claim(&driver).await;
        let reason = DeadReason::new(DeadKind::Failed, "deliberate").with_handler("scenario");
        dead_letters
            .add(&doomed, &reason)
            .await
            .expect("dead-lettering");
        1
    } else {
        0
    };
    let stats = default_stats(inspect).await;
    assert_count(stats.waiting, 3 - dead, "waiting");
    assert_count(stats.delayed, 2, "delayed");
    assert_count(stats.in_flight, 1, "in flight");
    if dead == 1 {
        assert_count(stats.dead, 1, "dead");
    }
    if let Figure::Exact(latency) = stats.latency {
        assert!(latency >= Duration::from_secs(1), "latency {latency:?}");
        assert!(latency < Duration::from_secs(60), "latency {latency:?}");
    }
    ack(&driver, &held).await;
    Outcome::Passed
}

/// A peek lists waiting and delayed messages, oldest first and at most `limit`, and leaves them
/// where they were: the next receive still gets the first one.
pub async fn peek_leaves_messages_where_they_were<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let caps = driver.capabilities();
    let Some(browse) = driver.browse() else {
        return Outcome::lacks_facet("browse");
    };
    let sent: Vec<Message> = (0..3).map(|n| message("peeked", n)).collect();
    for m in &sent {
        send(&driver, m, DEFAULT_PRIORITY).await;
    }
    let later = Message::builder("peeked")
        .delay(Duration::from_secs(600))
        .build()
        .expect("a message");
    send(&driver, &later, DEFAULT_PRIORITY).await;

    let peeked = browse
        .peek(DEFAULT_PRIORITY, QueueState::Waiting, 2)
        .await
        .expect("peek");
    assert_eq!(peeked.len(), 2, "the limit holds");
    if caps.fifo {
        assert_eq!(peeked, sent[..2], "oldest first, every field");
    }
    let again = browse
        .peek(DEFAULT_PRIORITY, QueueState::Waiting, 10)
        .await
        .expect("peek");
    assert_eq!(again.len(), 3, "a peek takes nothing away");
    let delayed = browse
        .peek(DEFAULT_PRIORITY, QueueState::Delayed, 10)
        .await
        .expect("peek delayed");
    assert_eq!(delayed, std::slice::from_ref(&later));

    let first = claim(&driver).await;
    if caps.fifo {
        assert_eq!(
            first.message().id(),
            sent[0].id(),
            "the next receive is unchanged"
        );
    }
    match browse
        .peek(DEFAULT_PRIORITY, QueueState::InFlight, 10)
        .await
    {
        Ok(in_flight) => assert_eq!(in_flight, [first.message().clone()]),
        // Without claims a taken message has left the backend: there is nothing to list.
        Err(hermes_core::Error::Unsupported { .. }) if !caps.at_least_once => {}
        Err(e) => panic!("peek in flight: {e}"),
    }
    ack(&driver, &first).await;
    Outcome::Passed
}

/// A purge empties the state it names and no other; a delete removes one message by id.
pub async fn purge_empties_only_what_it_names<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let Some(inspect) = driver.inspect() else {
        return Outcome::lacks_facet("inspect");
    };
    for n in 0..3 {
        send(&driver, &message("purged", n), DEFAULT_PRIORITY).await;
    }
    let later = Message::builder("purged")
        .delay(Duration::from_secs(600))
        .build()
        .expect("a message");
    send(&driver, &later, DEFAULT_PRIORITY).await;

    let purged = inspect
        .purge(DEFAULT_PRIORITY, QueueState::Waiting)
        .await
        .expect("purging waiting");
    if let Some(n) = purged {
        assert_eq!(n, 3);
    }
    assert!(
        driver
            .receive(&[], Duration::from_millis(500))
            .await
            .expect("receive")
            .is_none(),
        "nothing waiting is left"
    );
    let stats = default_stats(inspect).await;
    assert_count(stats.delayed, 1, "the delayed one stays");
    if let Some(browse) = driver.browse() {
        assert!(
            browse
                .delete(DEFAULT_PRIORITY, later.id())
                .await
                .expect("delete")
        );
        assert!(
            !browse
                .delete(DEFAULT_PRIORITY, later.id())
                .await
                .expect("delete")
        );
    } else {
        match inspect.purge(DEFAULT_PRIORITY, QueueState::Delayed).await {
            Ok(_) => {}
            // A backend may be unable to purge delayed messages alone (SQS cannot reach
            // them); the delayed one then stays.
            Err(hermes_core::Error::Unsupported { .. }) => return Outcome::Passed,
            Err(e) => panic!("purging delayed: {e}"),
        }
    }
    let stats = default_stats(inspect).await;
    assert_count(stats.delayed, 0, "no delayed one left");
    Outcome::Passed
}

/// A message whose handler fails without a retry policy becomes a dead letter with the
/// reason; an undecodable body does too. Replaying puts the message back due now with its
/// retries reset, and the body back as it was; the replayed message is handled.
pub async fn failed_messages_become_dead_letters_and_replay<H: Harness>(
    h: &H,
    queue: &str,
) -> Outcome {
    let driver: Arc<dyn Driver> = Arc::new(open(h, queue).await);
    let Some(dead_letters) = driver.dead_letters() else {
        return Outcome::lacks_facet("dead_letters");
    };
    let doomed = Message::builder("doomed")
        .id("doomed-1")
        .payload(&json!({"n": 1}))
        .retries(2)
        .build()
        .expect("a message");
    send(&driver, &doomed, DEFAULT_PRIORITY).await;
    let garbage: &[u8] = b"{not hermes json";
    let with_garbage = h.carries_raw(garbage);
    if with_garbage {
        h.push_raw(queue, garbage).await.expect("pushing garbage");
    }

    let mut dispatcher = Dispatcher::from_arc(driver.clone()).max_items(1);
    dispatcher.register_handler(
        "doomed",
        handler_fn(|_m: Message| async { Err::<bool, _>(HandlerError::msg("the disk is full")) })
            .named("Archiver"),
    );
    tokio::time::timeout(PATIENCE, dispatcher.handle(&[]))
        .await
        .expect("the dispatcher found no message")
        .expect("the dispatcher failed");
    if with_garbage {
        // The garbage is dead-lettered by the driver as the next receive meets it.
        let next = driver.receive(&[], Duration::from_secs(2)).await;
        assert!(
            matches!(next, Err(hermes_core::Error::Undecodable { .. }) | Ok(None)),
            "{next:?}"
        );
    }

    let letters = dead_letters
        .list(DEFAULT_PRIORITY, 10)
        .await
        .expect("listing dead letters");
    let failed = letters
        .iter()
        .find(|l| l.id == "doomed-1")
        .expect("the failed message is a dead letter");
    assert_eq!(failed.reason.kind, DeadKind::Failed);
    assert_eq!(failed.reason.error, "the disk is full");
    assert_eq!(failed.reason.handler.as_deref(), Some("Archiver"));
    assert_eq!(failed.reason.retries, 2);
    assert!((failed.reason.at - hermes_core::time::unix_now()).abs() < 120.0);
    assert_eq!(failed.message.as_ref(), Some(&doomed));
    if with_garbage {
        let undecodable = letters
            .iter()
            .find(|l| l.reason.kind == DeadKind::Undecodable)
            .expect("the garbage is a dead letter");
        assert!(undecodable.message.is_none());
        assert!(
            !undecodable.reason.error.contains("not hermes"),
            "no input in the reason"
        );
    }

    let replayed = dead_letters
        .replay(DEFAULT_PRIORITY, &Replay::ids(["doomed-1"]))
        .await
        .expect("replaying");
    assert_eq!(replayed, 1);
    let back = claim(&driver).await;
    assert_eq!(back.message().id(), "doomed-1");
    assert_eq!(back.message().retries(), 0, "retries reset");
    assert_eq!(back.message().payload(), doomed.payload());
    assert_eq!(back.message().execute_at(), None, "due now");
    ack(&driver, &back).await;
    let left = dead_letters
        .list(DEFAULT_PRIORITY, 10)
        .await
        .expect("listing dead letters");
    assert!(left.iter().all(|l| l.id != "doomed-1"), "replayed, so gone");

    let mut options = DispatcherOptions::default();
    options.max_items = 1;
    options.keep_dead_letters = false;
    let dropped = message("doomed", 2);
    send(&driver, &dropped, DEFAULT_PRIORITY).await;
    let mut dispatcher = Dispatcher::from_arc(driver.clone()).options(options);
    dispatcher.register_fn("doomed", |_m| async { Err(HandlerError::msg("again")) });
    tokio::time::timeout(PATIENCE, dispatcher.handle(&[]))
        .await
        .expect("the dispatcher found no message")
        .expect("the dispatcher failed");
    let letters = dead_letters
        .list(DEFAULT_PRIORITY, 10)
        .await
        .expect("listing dead letters");
    assert!(
        letters.iter().all(|l| l.id != dropped.id()),
        "with the opt-out it is dropped, as Hermes does"
    );
    Outcome::Passed
}

/// A worker's announcement is listed until it expires or is withdrawn, with what it said; a
/// dispatcher announces itself while it runs, with the message it handles, and withdraws when
/// it stops.
pub async fn workers_are_listed_until_they_expire<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver: Arc<dyn Driver> = Arc::new(open(h, queue).await);
    let Some(workers) = driver.workers() else {
        return Outcome::lacks_facet("workers");
    };
    let brief = WorkerInfo::new(2, &[DEFAULT_PRIORITY], Duration::from_secs(1));
    let mut lasting = WorkerInfo::new(4, &[], Duration::from_secs(60));
    lasting
        .running
        .push(RunningMessage::new("m-1", "report.export", 1.0));
    lasting.busy = 1;
    lasting.handled = 7;
    lasting.failed = 2;
    workers
        .announce(&brief, Duration::from_secs(1))
        .await
        .expect("announcing");
    workers
        .announce(&lasting, Duration::from_secs(60))
        .await
        .expect("announcing");
    let listed = workers.list().await.expect("listing workers");
    let ids: Vec<&str> = listed.iter().map(|w| w.id.as_str()).collect();
    assert!(
        ids.contains(&brief.id.as_str()) && ids.contains(&lasting.id.as_str()),
        "{ids:?}"
    );
    let found = listed.iter().find(|w| w.id == lasting.id).expect("listed");
    assert_eq!(found.running, lasting.running);
    assert_eq!((found.busy, found.concurrency), (1, 4));
    assert_eq!((found.handled, found.failed), (7, 2));
    assert!(found.announced > 0.0 && found.announced < found.expires);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let listed = workers.list().await.expect("listing workers");
    assert!(listed.iter().all(|w| w.id != brief.id), "expired, so gone");
    workers.withdraw(&lasting.id).await.expect("withdrawing");
    assert!(
        workers
            .list()
            .await
            .expect("listing workers")
            .iter()
            .all(|w| w.id != lasting.id),
        "withdrawn, so gone"
    );

    // A dispatcher announces itself while it runs and withdraws when it stops.
    send(&driver, &message("slow", 1), DEFAULT_PRIORITY).await;
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let started_tx = std::sync::Mutex::new(Some(started_tx));
    let (release_tx, release_rx) = tokio::sync::watch::channel(false);
    let mut options = DispatcherOptions::default();
    options.max_items = 1;
    // Renewed every half second, so the running message shows soon.
    options.announce_ttl = Some(Duration::from_millis(1500));
    let mut dispatcher = Dispatcher::from_arc(driver.clone()).options(options);
    dispatcher.register_fn("slow", move |_m| {
        let started = started_tx.lock().unwrap().take();
        let mut release = release_rx.clone();
        async move {
            if let Some(started) = started {
                let _ = started.send(());
            }
            let _ = release.wait_for(|go| *go).await;
            Ok(true)
        }
    });
    let running = tokio::spawn(async move { dispatcher.handle(&[]).await });
    tokio::time::timeout(PATIENCE, started_rx)
        .await
        .expect("the handler started")
        .expect("the handler started");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let me = loop {
        let found = workers
            .list()
            .await
            .expect("listing workers")
            .into_iter()
            .find(|w| {
                w.pid == std::process::id() && w.running.iter().any(|r| r.message_type == "slow")
            });
        if let Some(me) = found {
            break me;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the running dispatcher announced itself with its message"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(me.busy, 1);
    release_tx.send(true).expect("releasing");
    tokio::time::timeout(PATIENCE, running)
        .await
        .expect("the dispatcher stopped")
        .expect("the dispatcher task")
        .expect("the dispatcher");
    assert!(
        workers
            .list()
            .await
            .expect("listing workers")
            .iter()
            .all(|w| w.id != me.id),
        "a stopped dispatcher withdraws"
    );
    Outcome::Passed
}
