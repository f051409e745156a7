//! The dispatcher's rules, on the in-memory driver.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, DispatcherOptions, Driver, Emitter, Error, Handler, HandlerError,
    Message, Priority, RetryPolicy, SharedFileShutdown, Shutdown, handler_fn,
};
use hermes_testkit::{HookedDriver, LogCapture, MemoryDriver, Op};

fn recorder(log: &Arc<Mutex<Vec<String>>>, name: &'static str) -> Arc<dyn Handler> {
    let log = log.clone();
    Arc::new(
        handler_fn(move |m: Message| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(format!("{name}:{}", m.id()));
                Ok(true)
            }
        })
        .named(name),
    )
}

fn failing(name: &'static str, retry: Option<RetryPolicy>) -> Arc<dyn Handler> {
    let handler = handler_fn(|_m: Message| async { Err::<bool, _>(HandlerError::msg("it broke")) })
        .named(name);
    Arc::new(match retry {
        Some(policy) => handler.with_retry(policy),
        None => handler,
    })
}

async fn queue(driver: &MemoryDriver, id: &str, message_type: &str, priority: Priority) -> Message {
    let m = Message::builder(message_type).id(id).build().unwrap();
    driver.send(&m, priority).await.unwrap();
    m
}

#[tokio::test]
async fn handlers_run_in_order_with_the_hermes_log_lines() {
    let (logs, _guard) = LogCapture::install();
    let driver = Arc::new(MemoryDriver::new());
    queue(&driver, "m-1", "t", DEFAULT_PRIORITY).await;
    let calls = Arc::default();
    let mut dispatcher = Dispatcher::from_arc(driver.clone()).max_items(1);
    dispatcher.register_handler("t", recorder(&calls, "first"));
    dispatcher.register_handlers("t", [recorder(&calls, "second")]);
    dispatcher.handle(&[]).await.unwrap();

    assert_eq!(*calls.lock().unwrap(), ["first:m-1", "second:m-1"]);
    assert_eq!(
        logs.lines(),
        [
            "INFO Start handle message #m-1 (t) priority:100",
            "INFO End handle message #m-1 (t)",
            "INFO End handle message #m-1 (t)",
            "INFO Exiting hermes dispatcher - handled max items (1)",
        ]
    );
    assert!(driver.is_empty(), "the delivery was acknowledged");
}

#[tokio::test]
async fn a_message_without_handler_is_consumed_without_end_line() {
    let (logs, _guard) = LogCapture::install();
    let driver = Arc::new(MemoryDriver::new());
    queue(&driver, "m-2", "nobody", DEFAULT_PRIORITY).await;
    let calls = Arc::default();
    let mut dispatcher = Dispatcher::from_arc(driver.clone()).max_items(1);
    dispatcher.register_handler("other", recorder(&calls, "other"));
    dispatcher.handle(&[]).await.unwrap();
    assert!(logs.contains("INFO Start handle message #m-2 (nobody) priority:100"));
    assert_eq!(logs.count_starting_with("INFO End handle"), 0);
    assert!(calls.lock().unwrap().is_empty());
    assert!(driver.is_empty());
}

#[tokio::test]
async fn a_panicking_handler_is_logged_like_an_error_and_later_handlers_still_run() {
    let (logs, _guard) = LogCapture::install();
    let driver = Arc::new(MemoryDriver::new());
    queue(&driver, "m-3", "t", DEFAULT_PRIORITY).await;
    let calls = Arc::default();
    let mut dispatcher = Dispatcher::from_arc(driver.clone()).max_items(1);
    dispatcher.register_handler(
        "t",
        Arc::new(
            handler_fn(|_m: Message| async {
                if true {
                    panic!("kaboom");
                }
                Ok(true)
            })
            .named("Exploder"),
        ),
    );
    dispatcher.register_handler("t", recorder(&calls, "after"));
    dispatcher.handle(&[]).await.unwrap();
    assert!(
        logs.contains("ERROR Handler Exploder throws exception - panicked: kaboom"),
        "{:?}",
        logs.lines()
    );
    assert_eq!(*calls.lock().unwrap(), ["after:m-3"]);
    assert_eq!(logs.count_starting_with("INFO End handle message #m-3"), 1);
    assert!(driver.is_empty());
}

#[tokio::test]
async fn every_outcome_is_acknowledged() {
    // A subscriber of its own: a log line first met on a thread without one could stay
    // switched off for the tests that read the lines.
    let (_logs, _guard) = LogCapture::install();
    let driver = Arc::new(MemoryDriver::new());
    let outcomes: [(&str, Arc<dyn Handler>); 3] = [
        (
            "true",
            Arc::new(handler_fn(|_m: Message| async { Ok(true) })),
        ),
        (
            "false",
            Arc::new(handler_fn(|_m: Message| async { Ok(false) })),
        ),
        ("error", failing("Failing", None)),
    ];
    for (name, handler) in outcomes {
        queue(&driver, name, name, DEFAULT_PRIORITY).await;
        let mut dispatcher = Dispatcher::from_arc(driver.clone()).max_items(1);
        dispatcher.register_handler(name, handler);
        dispatcher.handle(&[]).await.unwrap();
        assert!(
            driver.is_empty(),
            "outcome {name} left the message on the queue"
        );
    }
}

#[tokio::test]
async fn a_failed_delivery_sends_one_copy_at_its_priority_until_the_last_retry() {
    let (logs, _guard) = LogCapture::install();
    let driver = Arc::new(MemoryDriver::new());
    driver.setup_priority_queue("high", 200).unwrap();
    let original = queue(&driver, "m-4", "t", 200).await;
    let policy = RetryPolicy::fixed(Duration::from_millis(300), 2);
    let mut dispatcher = Dispatcher::from_arc(driver.clone()).max_items(1);
    dispatcher.register_handler("t", failing("A", Some(policy.clone())));
    dispatcher.register_handler("t", failing("B", Some(policy)));
    dispatcher.handle(&[]).await.unwrap();
    assert!(logs.contains("ERROR Handler A throws exception - it broke"));
    assert!(logs.contains("ERROR Handler B throws exception - it broke"));
    assert_eq!(driver.len(), 1, "one copy however many handlers failed");

    let early = driver
        .receive(&[], Duration::from_millis(100))
        .await
        .unwrap();
    assert!(early.is_none(), "the copy waits its backoff");
    let copy = driver
        .receive(&[200], Duration::from_secs(2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(copy.priority(), 200, "the copy keeps the priority");
    let m = copy.message();
    assert_eq!(
        (m.id(), m.created(), m.retries()),
        (original.id(), original.created(), 1)
    );
    assert!(m.execute_at().unwrap() > original.created());
    driver.ack(&copy).await.unwrap();

    // At the last allowed retry count, no copy.
    let last = Message::builder("t").id("m-5").retries(2).build().unwrap();
    driver.send(&last, 200).await.unwrap();
    dispatcher.handle(&[]).await.unwrap();
    assert!(driver.is_empty(), "no copy after the last retry");
}

#[tokio::test]
async fn max_items_and_the_priority_filter() {
    // A subscriber of its own: a log line first met on a thread without one could stay
    // switched off for the tests that read the lines.
    let (_logs, _guard) = LogCapture::install();
    let driver = Arc::new(MemoryDriver::new());
    driver.setup_priority_queue("high", 200).unwrap();
    for i in 0..3 {
        queue(&driver, &format!("low-{i}"), "t", DEFAULT_PRIORITY).await;
    }
    queue(&driver, "high-0", "t", 200).await;
    let calls = Arc::default();
    let mut dispatcher = Dispatcher::from_arc(driver.clone()).max_items(2);
    dispatcher.register_handler("t", recorder(&calls, "h"));
    dispatcher.handle(&[DEFAULT_PRIORITY]).await.unwrap();
    assert_eq!(*calls.lock().unwrap(), ["h:low-0", "h:low-1"]);
    assert_eq!(driver.len(), 2);
    let rest = driver
        .receive(&[200], Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        rest.message().id(),
        "high-0",
        "the filtered-out priority was not touched"
    );
}

#[tokio::test]
async fn an_unknown_priority_filter_is_a_driver_error_exit() {
    let (logs, _guard) = LogCapture::install();
    let dispatcher = Dispatcher::new(MemoryDriver::new());
    let err = dispatcher.handle(&[999]).await.unwrap_err();
    assert!(matches!(err, Error::UnknownPriority(999)));
    assert!(
        logs.contains("ERROR Exiting hermes dispatcher - driver error: unknown priority 999: no queue is set up for it"),
        "{:?}",
        logs.lines()
    );
}

#[tokio::test]
async fn shutdown_is_checked_after_each_message() {
    let (logs, _guard) = LogCapture::install();
    let dir = tempdir();
    let shutdown = SharedFileShutdown::new(dir.join("shutdown"));
    let driver = Arc::new(MemoryDriver::new());
    for i in 0..3 {
        queue(&driver, &format!("s-{i}"), "t", DEFAULT_PRIORITY).await;
    }
    let trigger = shutdown.clone();
    let mut dispatcher = Dispatcher::from_arc(driver.clone()).with_shutdown(shutdown);
    dispatcher.register_handler(
        "t",
        Arc::new(handler_fn(move |_m: Message| {
            let trigger = trigger.clone();
            async move {
                trigger.shutdown(None).await.unwrap();
                Ok(true)
            }
        })),
    );
    dispatcher.handle(&[]).await.unwrap();
    assert_eq!(driver.len(), 2, "it stopped after the first message");
    assert_eq!(
        logs.lines().last().unwrap(),
        "INFO Exiting hermes dispatcher - shutdown"
    );
}

#[tokio::test]
async fn shutdown_is_checked_while_idle_and_an_old_signal_is_ignored() {
    // A subscriber of its own: a log line first met on a thread without one could stay
    // switched off for the tests that read the lines.
    let (_logs, _guard) = LogCapture::install();
    let dir = tempdir();
    let shutdown = SharedFileShutdown::new(dir.join("shutdown"));
    // Touched before the worker started: must not stop it.
    shutdown
        .shutdown(Some(std::time::SystemTime::now() - Duration::from_secs(30)))
        .await
        .unwrap();
    let mut options = DispatcherOptions::default();
    options.poll_wait = Duration::from_millis(100);
    let dispatcher = Dispatcher::new(MemoryDriver::new())
        .options(options)
        .with_shutdown(shutdown.clone());
    let started = Instant::now();
    let trigger = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(600)).await;
        shutdown.shutdown(None).await.unwrap();
    });
    tokio::time::timeout(Duration::from_secs(5), dispatcher.handle(&[]))
        .await
        .expect("the idle dispatcher noticed the shutdown")
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "the old signal stopped it"
    );
    trigger.await.unwrap();
}

/// The memory driver whose first `failures` receives fail, with a temporary error (a lost
/// connection) or a permanent one, for the dispatcher's error handling.
fn flaky(failures: usize, temporary: bool) -> Arc<HookedDriver<MemoryDriver>> {
    let driver = HookedDriver::new(MemoryDriver::new())
        .named("flaky")
        .fail_first(Op::Receive, failures, move || {
            if temporary {
                Error::connection(
                    "flaky",
                    std::io::Error::from(std::io::ErrorKind::ConnectionReset),
                )
            } else {
                Error::driver("flaky", "the queue was deleted", false)
            }
        });
    Arc::new(driver)
}

#[tokio::test]
async fn temporary_driver_errors_are_retried_with_backoff() {
    let (logs, _guard) = LogCapture::install();
    let driver = flaky(3, true);
    queue(driver.inner(), "f-1", "t", DEFAULT_PRIORITY).await;
    let calls = Arc::default();
    let mut dispatcher = Dispatcher::from_arc(driver).max_items(1);
    dispatcher.register_handler("t", recorder(&calls, "h"));
    dispatcher.handle(&[]).await.unwrap();
    assert_eq!(*calls.lock().unwrap(), ["h:f-1"]);
    let retries: Vec<_> = logs
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("WARN Driver error, retrying in"))
        .collect();
    assert_eq!(retries.len(), 3, "{retries:?}");
    assert!(
        retries[0]
            .starts_with("WARN Driver error, retrying in 100ms - flaky driver lost its connection")
    );
    assert!(retries[1].starts_with("WARN Driver error, retrying in 200ms"));
}

#[tokio::test]
async fn temporary_errors_that_last_too_long_and_permanent_errors_end_the_loop() {
    let (logs, _guard) = LogCapture::install();
    let driver = flaky(usize::MAX, true);
    let mut options = DispatcherOptions::default();
    options.temporary_error_timeout = Duration::from_millis(500);
    let started = Instant::now();
    let err = Dispatcher::from_arc(driver)
        .options(options)
        .handle(&[])
        .await
        .unwrap_err();
    assert!(err.is_temporary());
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert!(logs.lines().last().unwrap().starts_with(
        "ERROR Exiting hermes dispatcher - driver error: flaky driver lost its connection"
    ));

    let driver = flaky(1, false);
    let err = Dispatcher::from_arc(driver).handle(&[]).await.unwrap_err();
    assert!(!err.is_temporary());
    assert_eq!(
        logs.lines().last().unwrap(),
        "ERROR Exiting hermes dispatcher - driver error: flaky driver error: the queue was deleted"
    );
}

fn sleeper(gauge: Arc<(AtomicUsize, AtomicUsize)>, sleep: Duration) -> Arc<dyn Handler> {
    Arc::new(handler_fn(move |_m: Message| {
        let gauge = gauge.clone();
        async move {
            let now = gauge.0.fetch_add(1, Ordering::SeqCst) + 1;
            gauge.1.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(sleep).await;
            gauge.0.fetch_sub(1, Ordering::SeqCst);
            Ok(true)
        }
    }))
}

#[tokio::test]
async fn concurrency_runs_that_many_handlers_at_once() {
    // A subscriber of its own: a log line first met on a thread without one could stay
    // switched off for the tests that read the lines.
    let (_logs, _guard) = LogCapture::install();
    for concurrency in [1usize, 8] {
        let driver = Arc::new(MemoryDriver::new());
        for i in 0..16 {
            queue(&driver, &format!("c-{i}"), "t", DEFAULT_PRIORITY).await;
        }
        let gauge: Arc<(AtomicUsize, AtomicUsize)> = Arc::default();
        let mut dispatcher = Dispatcher::from_arc(driver.clone())
            .concurrency(concurrency)
            .max_items(16);
        dispatcher.register_handler("t", sleeper(gauge.clone(), Duration::from_millis(50)));
        dispatcher.handle(&[]).await.unwrap();
        assert_eq!(gauge.1.load(Ordering::SeqCst), concurrency);
        assert!(
            driver.is_empty(),
            "max items waits for every running handler"
        );
    }
}

#[tokio::test]
async fn graceful_shutdown_waits_for_the_grace_period_then_gives_unfinished_back() {
    // A subscriber of its own: a log line first met on a thread without one could stay
    // switched off for the tests that read the lines.
    let (_logs, _guard) = LogCapture::install();
    let driver = Arc::new(MemoryDriver::new());
    queue(&driver, "quick", "quick", DEFAULT_PRIORITY).await;
    queue(&driver, "slow", "slow", DEFAULT_PRIORITY).await;
    let gauge: Arc<(AtomicUsize, AtomicUsize)> = Arc::default();
    let mut options = DispatcherOptions::default();
    options.concurrency = 2;
    options.grace_period = Duration::from_millis(400);
    let mut dispatcher = Dispatcher::from_arc(driver.clone()).options(options);
    dispatcher.register_handler("quick", sleeper(gauge.clone(), Duration::from_millis(200)));
    dispatcher.register_handler("slow", sleeper(gauge.clone(), Duration::from_secs(30)));
    let token = dispatcher.cancellation_token();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        token.cancel();
    });
    let started = Instant::now();
    dispatcher.handle(&[]).await.unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert_eq!(driver.len(), 1, "the unfinished message stays");
    let left = driver.receive(&[], Duration::ZERO).await.unwrap().unwrap();
    assert_eq!(left.message().id(), "slow", "and is given back at once");
}

#[tokio::test]
async fn undecodable_messages_are_skipped_or_stop_the_worker() {
    let (logs, _guard) = LogCapture::install();
    let driver = Arc::new(MemoryDriver::new());
    driver.push_raw(DEFAULT_PRIORITY, b"garbage").unwrap();
    queue(&driver, "ok-1", "t", DEFAULT_PRIORITY).await;
    let calls = Arc::default();
    let mut dispatcher = Dispatcher::from_arc(driver.clone()).max_items(1);
    dispatcher.register_handler("t", recorder(&calls, "h"));
    dispatcher.handle(&[]).await.unwrap();
    assert_eq!(*calls.lock().unwrap(), ["h:ok-1"]);
    assert_eq!(logs.count_starting_with("ERROR Skipping undecodable message - undecodable message moved to the memory quarantine: cannot decode message: invalid JSON"), 1, "{:?}", logs.lines());
    assert_eq!(driver.quarantined(), [b"garbage".to_vec()]);

    driver.push_raw(DEFAULT_PRIORITY, b"{}").unwrap();
    let mut options = DispatcherOptions::default();
    options.stop_on_undecodable = true;
    let err = Dispatcher::from_arc(driver.clone())
        .options(options)
        .handle(&[])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Undecodable { .. }), "{err}");
}

#[tokio::test]
async fn the_emitter_logs_each_message() {
    let (logs, _guard) = LogCapture::install();
    let driver = MemoryDriver::new();
    let emitter = Emitter::new(driver.reopen());
    let m = Message::builder("t").id("e-1").build().unwrap();
    emitter.emit(&m, DEFAULT_PRIORITY).await.unwrap();
    assert_eq!(
        logs.lines(),
        ["INFO Emitter send message #e-1 to driver memory"]
    );
    let err = emitter.emit(&m, 5).await.unwrap_err();
    assert!(matches!(err, Error::UnknownPriority(5)));
    assert_eq!(driver.len(), 1);
}

/// The emitter's line carries the id, created time and type, and the payload only when the
/// emitter is told to log it: payloads carry personal data.
#[tokio::test]
async fn the_emitter_logs_the_payload_only_when_told() {
    let (logs, _guard) = LogCapture::install();
    let driver = MemoryDriver::new();
    let m = Message::builder("t")
        .id("e-2")
        .payload(&serde_json::json!({"email": "secret@example.com"}))
        .build()
        .unwrap();
    Emitter::new(driver.reopen())
        .emit(&m, DEFAULT_PRIORITY)
        .await
        .unwrap();
    Emitter::new(driver.reopen())
        .log_payloads(true)
        .emit(&m, DEFAULT_PRIORITY)
        .await
        .unwrap();
    let lines = logs.lines_with_fields();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for line in &lines {
        assert!(
            line.starts_with("INFO Emitter send message #e-2 to driver memory"),
            "{line}"
        );
        assert!(
            line.contains("id=\"e-2\"") && line.contains("type=\"t\""),
            "{line}"
        );
        assert!(line.contains("created="), "{line}");
    }
    assert!(!lines[0].contains("secret@example.com"), "{}", lines[0]);
    assert!(!lines[0].contains("payload"), "{}", lines[0]);
    assert!(
        lines[1].contains("payload={\"email\":\"secret@example.com\"}"),
        "{}",
        lines[1]
    );
}

#[tokio::test]
async fn unregistering_removes_one_instance_or_all() {
    // A subscriber of its own: a log line first met on a thread without one could stay
    // switched off for the tests that read the lines.
    let (_logs, _guard) = LogCapture::install();
    let driver = Arc::new(MemoryDriver::new());
    let calls = Arc::default();
    let a = recorder(&calls, "a");
    let a_again = recorder(&calls, "a2");
    let mut dispatcher = Dispatcher::from_arc(driver.clone()).max_items(1);
    dispatcher.register_handler("t", a.clone());
    dispatcher.register_handler("t", a_again.clone());
    assert!(dispatcher.unregister_handler("t", &a));
    assert!(!dispatcher.unregister_handler("t", &a), "already gone");
    queue(&driver, "u-1", "t", DEFAULT_PRIORITY).await;
    dispatcher.handle(&[]).await.unwrap();
    assert_eq!(*calls.lock().unwrap(), ["a2:u-1"]);

    dispatcher.unregister_all_handlers();
    queue(&driver, "u-2", "t", DEFAULT_PRIORITY).await;
    dispatcher.handle(&[]).await.unwrap();
    assert_eq!(calls.lock().unwrap().len(), 1);
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hermes-core-test-{:016x}", rand_u64()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

#[tokio::test]
async fn the_announcement_counts_handled_and_failed_messages() {
    let (_logs, _guard) = LogCapture::install();
    let driver = MemoryDriver::new();
    queue(&driver, "a", "ok", DEFAULT_PRIORITY).await;
    queue(&driver, "b", "bad", DEFAULT_PRIORITY).await;
    queue(&driver, "c", "ok", DEFAULT_PRIORITY).await;
    queue(&driver, "d", "hold", DEFAULT_PRIORITY).await;
    let (release_tx, release_rx) = tokio::sync::watch::channel(false);
    let mut options = DispatcherOptions::default();
    options.max_items = 4;
    options.announce_ttl = Some(Duration::from_millis(300));
    let mut dispatcher = Dispatcher::new(driver.clone()).options(options);
    dispatcher.register_fn("ok", |_m| async { Ok(true) });
    dispatcher.register_handler("bad", failing("bad", None));
    dispatcher.register_fn("hold", move |_m| {
        let mut release = release_rx.clone();
        async move {
            let _ = release.wait_for(|go| *go).await;
            Ok(true)
        }
    });
    let running = tokio::spawn(async move { dispatcher.handle(&[]).await });
    let deadline = Instant::now() + Duration::from_secs(5);
    let me = loop {
        let workers = driver.workers().unwrap().list().await.unwrap();
        if let Some(me) = workers.into_iter().find(|w| w.busy == 1 && w.handled == 3) {
            break me;
        }
        assert!(
            Instant::now() < deadline,
            "the worker announced three handled messages while the fourth ran"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(me.failed, 1, "one of the three failed");
    assert!(me.announced >= me.started && me.announced < me.expires);
    release_tx.send(true).unwrap();
    running.await.unwrap().unwrap();
}
