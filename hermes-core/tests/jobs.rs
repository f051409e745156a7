//! Typed jobs on the in-memory driver: emitting, handling, errors, bad payloads, time limits
//! and the job context.
//!
//! Every async test captures its log lines, also where it asserts none: a log callsite first
//! met on a thread without a subscriber can stay switched off for the tests that assert lines.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, DispatcherOptions, Driver, Emitter, HandlerError, HandlerOutcome,
    Job, JobContext, JobHandler, Message, RetryPolicy, async_trait,
};
use hermes_testkit::{LogCapture, MemoryDriver, MemoryOptions};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct SendEmail {
    to: String,
    attempts: u32,
}

impl Job for SendEmail {
    const TYPE: &'static str = "send-email";
    const PRIORITY: hermes_core::Priority = 110;
    fn retry_policy() -> Option<RetryPolicy> {
        Some(RetryPolicy::fixed(Duration::ZERO, 2))
    }
}

/// A job that records each run's context and fails its first `fail_runs` runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Flaky {
    fail_runs: u32,
}

impl Job for Flaky {
    const TYPE: &'static str = "flaky";
    fn retry_policy() -> Option<RetryPolicy> {
        Some(RetryPolicy::fixed(Duration::ZERO, 5))
    }
}

fn driver() -> MemoryDriver {
    let driver = MemoryDriver::new();
    driver.setup_priority_queue("hermes_110", 110).unwrap();
    driver
}

#[tokio::test]
async fn a_typed_job_and_a_php_message_of_its_type_reach_the_typed_handler() {
    let (_logs, _capture) = LogCapture::install();
    let driver = driver();
    let emitter = Emitter::new(driver.clone());
    let job = SendEmail {
        to: "a@b.c".into(),
        attempts: 1,
    };
    let id = emitter.emit_job(&job).await.unwrap();
    let php = r#"{"message":{"id":"php-1","type":"send-email","created":1637617498.172724,"payload":{"to":"x\/y@z.sk","attempts":2},"execute_at":null,"retries":0}}"#;
    driver.push_raw(DEFAULT_PRIORITY, php.as_bytes()).unwrap();

    let seen: Arc<Mutex<Vec<(String, i32, SendEmail)>>> = Arc::default();
    let record = seen.clone();
    let mut dispatcher = Dispatcher::new(driver.clone()).max_items(2);
    dispatcher.register_job(move |job: SendEmail, ctx: JobContext| {
        let record = record.clone();
        async move {
            record
                .lock()
                .unwrap()
                .push((ctx.id().to_owned(), ctx.priority(), job));
            Ok::<_, std::io::Error>(())
        }
    });
    dispatcher.handle(&[]).await.unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            (id, 110, job),
            (
                "php-1".to_owned(),
                DEFAULT_PRIORITY,
                SendEmail {
                    to: "x/y@z.sk".into(),
                    attempts: 2
                }
            ),
        ],
        "the job's priority queue first, then the PHP message"
    );
    assert!(driver.is_empty());
}

#[tokio::test]
async fn the_builder_sets_priority_delay_and_id_and_batches_keep_each_job() {
    let (_logs, _capture) = LogCapture::install();
    let driver = driver();
    let emitter = Emitter::new(driver.clone());
    let job = SendEmail {
        to: "a@b.c".into(),
        attempts: 0,
    };
    let id = emitter
        .job(&job)
        .priority(DEFAULT_PRIORITY)
        .delay(Duration::from_millis(300))
        .id("mail-1")
        .send()
        .await
        .unwrap();
    assert_eq!(id, "mail-1");
    assert!(driver.receive(&[], Duration::ZERO).await.unwrap().is_none());
    let started = Instant::now();
    let delivery = driver
        .receive(&[DEFAULT_PRIORITY], Duration::from_secs(3))
        .await
        .unwrap()
        .expect("due after the delay");
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(delivery.message().id(), "mail-1");
    assert_eq!(delivery.message().to_job::<SendEmail>().unwrap(), job);
    driver.ack(&delivery).await.unwrap();

    let at = SystemTime::now() + Duration::from_secs(3600);
    let message = emitter.job(&job).at(at).message().unwrap();
    let due = message.execute_at().unwrap();
    assert!((due - hermes_core::time::to_unix(at)).abs() < 1e-3);

    let jobs: Vec<_> = (0..3)
        .map(|n| SendEmail {
            to: format!("{n}@b.c"),
            attempts: n,
        })
        .collect();
    let ids = emitter.emit_jobs(&jobs).await.unwrap();
    assert_eq!(ids.len(), 3);
    for (n, id) in ids.iter().enumerate() {
        let delivery = driver
            .receive(&[110], Duration::ZERO)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(delivery.message().id(), id);
        assert_eq!(delivery.message().to_job::<SendEmail>().unwrap(), jobs[n]);
        driver.ack(&delivery).await.unwrap();
    }
}

#[tokio::test]
async fn any_error_type_fails_the_run_and_is_retried_by_the_jobs_policy() {
    let (_logs, _capture) = LogCapture::install();
    #[derive(Debug, thiserror::Error)]
    #[error("smtp said no")]
    struct SmtpError;

    async fn with_std(_: SendEmail, _: JobContext) -> Result<(), SmtpError> {
        Err(SmtpError)
    }
    async fn with_anyhow(_: SendEmail, _: JobContext) -> anyhow::Result<()> {
        Err(anyhow::anyhow!("anyhow said no"))
    }
    async fn with_string(_: SendEmail, _: JobContext) -> Result<(), String> {
        Err("a string said no".to_owned())
    }
    async fn with_str(_: SendEmail, _: JobContext) -> Result<(), &'static str> {
        Err("a str said no")
    }
    async fn with_handler_error(_: SendEmail, _: JobContext) -> Result<(), HandlerError> {
        Err(HandlerError::msg("a handler error said no"))
    }

    let (logs, _guard) = LogCapture::install();
    let mut dispatcher = Dispatcher::new(driver());
    dispatcher
        .register_job(with_std)
        .register_job(with_anyhow)
        .register_job(with_string)
        .register_job(with_str)
        .register_job(with_handler_error);
    let message = Message::builder("send-email")
        .id("m-1")
        .payload(&serde_json::json!({"to": "a@b.c", "attempts": 0}))
        .retries(1)
        .build()
        .unwrap();
    let report = dispatcher.perform(&message, 110).await;
    let errors: Vec<_> = report
        .runs
        .iter()
        .map(|run| match &run.outcome {
            HandlerOutcome::Failed(error) => error.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        errors,
        [
            "smtp said no",
            "anyhow said no",
            "a string said no",
            "a str said no",
            "a handler error said no"
        ]
    );
    assert!(
        logs.contains("ERROR Handler jobs::any_error_type_fails_the_run_and_is_retried_by_the_jobs_policy::with_anyhow throws exception - anyhow said no"),
        "{:#?}",
        logs.lines()
    );
    let retry = report.retry.expect("one retry copy");
    assert_eq!((retry.id(), retry.retries()), ("m-1", 2));

    let last = Message::builder("send-email")
        .payload(&serde_json::json!({"to": "a@b.c", "attempts": 0}))
        .retries(2)
        .build()
        .unwrap();
    assert!(dispatcher.perform(&last, 110).await.retry.is_none());
}

#[tokio::test]
async fn a_payload_that_does_not_fit_is_rejected_for_good_without_its_values_in_the_log() {
    let (logs, _guard) = LogCapture::install();
    let driver = driver();
    let ran = Arc::new(AtomicUsize::new(0));
    let count = ran.clone();
    let mut dispatcher = Dispatcher::new(driver.clone()).max_items(2);
    dispatcher.register_job(move |_: SendEmail, _| {
        count.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, String>(()) }
    });
    for (id, payload) in [
        (
            "wrong-type",
            serde_json::json!({"to": "secret@x.sk", "attempts": "many"}),
        ),
        ("missing", serde_json::json!({"attempts": 1})),
    ] {
        let message = Message::builder("send-email")
            .id(id)
            .payload(&payload)
            .build()
            .unwrap();
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    }
    dispatcher.handle(&[]).await.unwrap();

    assert_eq!(ran.load(Ordering::SeqCst), 0, "the handler never runs");
    assert!(
        driver.is_empty(),
        "both are consumed, and no retry copy is sent"
    );
    let errors: Vec<_> = logs
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("ERROR"))
        .collect();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(errors[0].contains("#wrong-type"), "{}", errors[0]);
    assert!(
        errors[0].contains("attempts: invalid type: string \"…\", expected u32"),
        "{}",
        errors[0]
    );
    assert!(errors[1].contains("#missing") && errors[1].contains("missing field `to`"));
    let all = logs.lines_with_fields().join("\n");
    assert!(!all.contains("secret") && !all.contains("many"), "{all}");

    let report = dispatcher
        .perform(
            &Message::builder("send-email")
                .payload(&serde_json::json!([1]))
                .build()
                .unwrap(),
            DEFAULT_PRIORITY,
        )
        .await;
    assert!(matches!(
        report.runs[0].outcome,
        HandlerOutcome::Rejected(_)
    ));
    assert!(report.retry.is_none(), "a rejected payload is not retried");
}

#[tokio::test]
async fn the_context_tells_the_message_and_retries_count_up() {
    let (_logs, _capture) = LogCapture::install();
    let driver = driver();
    let contexts: Arc<Mutex<Vec<JobContext>>> = Arc::default();
    let record = contexts.clone();
    let mut dispatcher = Dispatcher::new(driver.clone()).max_items(3);
    dispatcher.register_job(move |job: Flaky, ctx: JobContext| {
        let record = record.clone();
        async move {
            let retries = ctx.retries();
            record.lock().unwrap().push(ctx);
            if retries < job.fail_runs {
                return Err(format!("run {retries} fails"));
            }
            Ok(())
        }
    });
    let created = SystemTime::now();
    let id = Emitter::new(driver.clone())
        .emit_job(&Flaky { fail_runs: 2 })
        .await
        .unwrap();
    dispatcher.handle(&[]).await.unwrap();

    let contexts = contexts.lock().unwrap();
    let retries: Vec<_> = contexts.iter().map(JobContext::retries).collect();
    assert_eq!(retries, [0, 1, 2]);
    for ctx in contexts.iter() {
        assert_eq!((ctx.id(), ctx.message_type()), (id.as_str(), "flaky"));
        assert_eq!(ctx.priority(), DEFAULT_PRIORITY);
        let since = ctx.created().duration_since(created).unwrap_or_default();
        assert!(since < Duration::from_secs(1));
        assert!(ctx.due() >= ctx.created());
        assert!(!ctx.is_cancelled());
        assert_eq!(ctx.time_limit(), None);
    }
    let debug = format!("{:?}", contexts[0]);
    assert!(debug.contains(&id) && debug.contains("flaky"), "{debug}");
    assert!(driver.is_empty());
}

/// A job limited to 200 ms that runs over it on its first run.
#[derive(Debug, Serialize, Deserialize)]
struct Slow;

impl Job for Slow {
    const TYPE: &'static str = "slow";
    const TIME_LIMIT: Option<Duration> = Some(Duration::from_millis(200));
    fn retry_policy() -> Option<RetryPolicy> {
        Some(RetryPolicy::fixed(Duration::ZERO, 1))
    }
}

struct DropFlag(Arc<AtomicUsize>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_handler_past_its_limit_is_cancelled_then_dropped_and_retried() {
    let (logs, _guard) = LogCapture::install();
    let driver = driver();
    let cancelled_at = Arc::new(Mutex::new(None));
    let dropped = Arc::new(AtomicUsize::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    let mut options = DispatcherOptions::default();
    options.time_limit_grace = Duration::from_millis(300);
    options.max_items = 2;
    let mut dispatcher = Dispatcher::new(driver.clone()).options(options);
    let (seen, flag, count) = (cancelled_at.clone(), dropped.clone(), runs.clone());
    dispatcher.register_job(move |_: Slow, ctx: JobContext| {
        let (seen, flag, count) = (seen.clone(), flag.clone(), count.clone());
        async move {
            count.fetch_add(1, Ordering::SeqCst);
            if ctx.retries() > 0 {
                return Ok(());
            }
            let _guard = DropFlag(flag);
            assert_eq!(ctx.time_limit(), Some(Duration::from_millis(200)));
            ctx.cancelled().await;
            *seen.lock().unwrap() = Some(Instant::now());
            // Ignores the request to stop: the dispatcher drops it after the grace.
            std::future::pending::<()>().await;
            Ok::<_, String>(())
        }
    });
    Emitter::new(driver.clone()).emit_job(&Slow).await.unwrap();
    let started = Instant::now();
    dispatcher.handle(&[]).await.unwrap();
    let took = started.elapsed();

    let cancelled = cancelled_at.lock().unwrap().expect("the token fired");
    let at = cancelled.duration_since(started);
    assert!(
        at >= Duration::from_millis(190) && at < Duration::from_millis(450),
        "{at:?}"
    );
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "the future was dropped");
    assert!(
        took >= Duration::from_millis(490),
        "the grace was given: {took:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2, "retried once, then done");
    assert_eq!(
        logs.count_starting_with("ERROR Handler jobs::a_handler_past_its_limit_is_cancelled_then_dropped_and_retried::{closure} timed out after 200ms"),
        1,
        "{:#?}",
        logs.lines()
    );
    assert!(driver.is_empty());
}

#[tokio::test]
async fn the_dispatcher_wide_limit_applies_to_raw_handlers_and_a_jobs_own_limit_wins() {
    let (_logs, _capture) = LogCapture::install();
    let mut dispatcher = Dispatcher::new(driver()).time_limit(Duration::from_millis(100));
    dispatcher.register_fn("sleepy", |_| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(true)
    });
    dispatcher.register_job(|_: Slow, ctx: JobContext| async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(
            !ctx.is_cancelled(),
            "Slow's own 200 ms limit replaces 100 ms"
        );
        Ok::<_, String>(())
    });
    let started = Instant::now();
    let report = dispatcher
        .perform(&Message::new("sleepy"), DEFAULT_PRIORITY)
        .await;
    assert_eq!(
        report.runs[0].outcome,
        HandlerOutcome::TimedOut(Duration::from_millis(100))
    );
    assert!(report.retry.is_none(), "a raw closure has no retry policy");
    assert!(started.elapsed() < Duration::from_secs(5));
    let report = dispatcher
        .perform(&Message::from_job(&Slow).unwrap(), DEFAULT_PRIORITY)
        .await;
    assert!(report.succeeded(), "{report:?}");
}

#[tokio::test]
async fn shutdown_cancels_the_token_and_leaves_the_grace_period() {
    let (_logs, _capture) = LogCapture::install();
    let driver = driver();
    let mut options = DispatcherOptions::default();
    options.grace_period = Duration::from_secs(5);
    let mut dispatcher = Dispatcher::new(driver.clone()).options(options);
    let finished = Arc::new(AtomicUsize::new(0));
    let done = finished.clone();
    dispatcher.register_job(move |_: Flaky, ctx: JobContext| {
        let done = done.clone();
        async move {
            ctx.cancelled().await;
            // Stops at a safe point, well within the grace period.
            tokio::time::sleep(Duration::from_millis(100)).await;
            done.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(())
        }
    });
    Emitter::new(driver.clone())
        .emit_job(&Flaky { fail_runs: 0 })
        .await
        .unwrap();
    let token = dispatcher.cancellation_token();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        token.cancel();
    });
    let started = Instant::now();
    dispatcher.handle(&[]).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(finished.load(Ordering::SeqCst), 1);
    assert!(driver.is_empty(), "it finished, so it was acknowledged");
}

struct Counter {
    runs: AtomicUsize,
}

#[async_trait]
impl JobHandler<Flaky> for Counter {
    type Output = ();
    type Error = std::io::Error;

    async fn handle(&self, _job: Flaky, _ctx: JobContext) -> Result<(), Self::Error> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn a_stateful_handler_registers_by_value_or_shared() {
    let (_logs, _capture) = LogCapture::install();
    let shared = Arc::new(Counter {
        runs: AtomicUsize::new(0),
    });
    let mut dispatcher = Dispatcher::new(driver());
    dispatcher
        .register_job_handler(shared.clone())
        .register_job_handler(Counter {
            runs: AtomicUsize::new(0),
        });
    let report = dispatcher
        .perform(
            &Message::from_job(&Flaky { fail_runs: 0 }).unwrap(),
            DEFAULT_PRIORITY,
        )
        .await;
    assert!(report.succeeded());
    assert_eq!(report.runs.len(), 2);
    assert_eq!(report.runs[0].handler, "jobs::Counter");
    assert_eq!(shared.runs.load(Ordering::SeqCst), 1);
}

#[test]
fn a_handler_that_extends_its_claim_is_not_run_twice_while_it_blocks() {
    // The handler blocks its thread, so the dispatcher's own renewals cannot run: only the
    // extension it asked for keeps the 300 ms claim from expiring under it.
    for extend in [true, false] {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let runs = runtime.block_on(async {
            let mut memory = MemoryOptions::default();
            memory.visibility_timeout = Duration::from_millis(300);
            let driver = MemoryDriver::with_options(memory).unwrap();
            let runs = Arc::new(AtomicUsize::new(0));
            let count = runs.clone();
            let mut options = DispatcherOptions::default();
            options.concurrency = 2;
            options.poll_wait = Duration::from_millis(50);
            options.max_items = 2;
            let mut dispatcher = Dispatcher::new(driver.clone()).options(options);
            dispatcher.register_job(move |_: Flaky, ctx: JobContext| {
                let count = count.clone();
                async move {
                    if extend {
                        ctx.extend_claim(Duration::from_secs(5)).await.unwrap();
                    }
                    count.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(900));
                    Ok::<_, String>(())
                }
            });
            Emitter::new(driver.clone())
                .emit_job(&Flaky { fail_runs: 0 })
                .await
                .unwrap();
            // A thread of its own: blocked workers may keep the runtime's timers from firing.
            let token = dispatcher.cancellation_token();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(1500));
                token.cancel();
            });
            dispatcher.handle(&[]).await.unwrap();
            runs.load(Ordering::SeqCst)
        });
        if extend {
            assert_eq!(runs, 1, "the extended claim held");
        } else {
            assert!(runs >= 2, "without it the claim expires: the test can tell");
        }
    }
}

#[test]
fn a_job_encodes_to_the_bytes_of_the_same_message_built_by_hand() {
    use hermes_core::{JsonSerializer, MessageBuilder, Serializer};
    let job = SendEmail {
        to: "a/b@c.sk".into(),
        attempts: 1,
    };
    let typed = MessageBuilder::for_job(&job)
        .id("m-1")
        .created(1637617498.172724)
        .build()
        .unwrap();
    let by_hand = Message::builder("send-email")
        .id("m-1")
        .created(1637617498.172724)
        .payload(&serde_json::json!({"to": "a/b@c.sk", "attempts": 1}))
        .build()
        .unwrap();
    let bytes = JsonSerializer.serialize(&typed).unwrap();
    assert_eq!(bytes, JsonSerializer.serialize(&by_hand).unwrap());
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        r#"{"message":{"id":"m-1","type":"send-email","created":1637617498.172724,"payload":{"to":"a\/b@c.sk","attempts":1},"execute_at":null,"retries":0}}"#
    );
}
