//! Scenarios of typed jobs: what the typed layer promises holds on every backend.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, DispatcherOptions, Driver, Emitter, Job, JobContext, RetryPolicy,
};
use serde::{Deserialize, Serialize};

use super::support::{PATIENCE, expect_none, open};
use super::{Harness, Outcome};

/// The job of [`typed_jobs_meet_php_messages`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Invoice {
    number: u32,
    customer: String,
}

impl Job for Invoice {
    const TYPE: &'static str = "invoice";
}

/// A typed emit is handled by a typed handler, and so is a message of that type in the bytes
/// PHP Hermes writes; a PHP message whose payload does not fit the type is consumed without
/// reaching the handler.
pub async fn typed_jobs_meet_php_messages<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver: Arc<dyn Driver> = Arc::new(open(h, queue).await);
    let php = br#"{"message":{"id":"php-invoice-7","type":"invoice","created":1637617498.172724,"payload":{"number":7,"customer":"Jo\u017eo \/ s.r.o."},"execute_at":null,"retries":0}}"#;
    let misfit = br#"{"message":{"id":"php-invoice-x","type":"invoice","created":1637617498.5,"payload":{"number":"seven"},"execute_at":null,"retries":0}}"#;
    if !h.carries_raw(php) || !h.carries_raw(misfit) {
        return Outcome::Skipped("the backend cannot carry these raw bodies".into());
    }
    let rust = Invoice {
        number: 1,
        customer: "Ferko".into(),
    };
    let id = Emitter::from_arc(driver.clone())
        .emit_job(&rust)
        .await
        .expect("emitting the job");
    h.push_raw(queue, php)
        .await
        .expect("pushing the PHP message");
    h.push_raw(queue, misfit).await.expect("pushing the misfit");

    let seen: Arc<Mutex<Vec<(String, Invoice)>>> = Arc::default();
    let record = seen.clone();
    let mut dispatcher = Dispatcher::from_arc(driver.clone()).max_items(3);
    dispatcher.register_job(move |invoice: Invoice, ctx: JobContext| {
        let record = record.clone();
        async move {
            record.lock().unwrap().push((ctx.id().to_owned(), invoice));
            Ok::<_, String>(())
        }
    });
    tokio::time::timeout(PATIENCE * 3, dispatcher.handle(&[]))
        .await
        .expect("the dispatcher did not take the three messages")
        .expect("the dispatcher failed");

    let mut seen = seen.lock().unwrap().clone();
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    let mut want = vec![
        (id, rust),
        (
            "php-invoice-7".to_owned(),
            Invoice {
                number: 7,
                customer: "Jožo / s.r.o.".into(),
            },
        ),
    ];
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(seen, want, "the misfit never reaches the handler");
    expect_none(&driver, &[], Duration::from_secs(2)).await;
    Outcome::Passed
}

/// The job of [`a_handler_past_its_time_limit_is_cancelled_and_retried`].
#[derive(Debug, Serialize, Deserialize)]
struct Sluggish {
    n: u32,
}

impl Job for Sluggish {
    const TYPE: &'static str = "sluggish";
    const TIME_LIMIT: Option<Duration> = Some(Duration::from_millis(300));
    fn retry_policy() -> Option<RetryPolicy> {
        Some(RetryPolicy::fixed(Duration::ZERO, 1))
    }
}

/// Counts the drops of a handler's future.
struct DropCounter(Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A handler still running at its job's time limit sees its token fire, has its future dropped
/// after the grace, and the message is retried by the job's policy: the retry copy (retries 1)
/// runs and is done, and nothing is left on the queue.
pub async fn a_handler_past_its_time_limit_is_cancelled_and_retried<H: Harness>(
    h: &H,
    queue: &str,
) -> Outcome {
    let driver: Arc<dyn Driver> = Arc::new(open(h, queue).await);
    Emitter::from_arc(driver.clone())
        .job(&Sluggish { n: 1 })
        .priority(DEFAULT_PRIORITY)
        .send()
        .await
        .expect("emitting the job");

    let runs: Arc<Mutex<Vec<(u32, bool)>>> = Arc::default();
    let dropped = Arc::new(AtomicUsize::new(0));
    let mut options = DispatcherOptions::default();
    options.max_items = 2;
    options.time_limit_grace = Duration::from_millis(200);
    let mut dispatcher = Dispatcher::from_arc(driver.clone()).options(options);
    let (record, drops) = (runs.clone(), dropped.clone());
    dispatcher.register_job(move |_: Sluggish, ctx: JobContext| {
        let (record, drops) = (record.clone(), drops.clone());
        async move {
            if ctx.retries() > 0 {
                record
                    .lock()
                    .unwrap()
                    .push((ctx.retries(), ctx.is_cancelled()));
                return Ok(());
            }
            let _counter = DropCounter(drops);
            let fired = tokio::time::timeout(PATIENCE, ctx.cancelled())
                .await
                .is_ok();
            record.lock().unwrap().push((ctx.retries(), fired));
            // Goes on regardless: the dispatcher must drop it after the grace.
            std::future::pending::<()>().await;
            Ok::<_, String>(())
        }
    });
    tokio::time::timeout(PATIENCE * 3, dispatcher.handle(&[]))
        .await
        .expect("the dispatcher did not take the message and its retry")
        .expect("the dispatcher failed");

    assert_eq!(
        *runs.lock().unwrap(),
        [(0, true), (1, false)],
        "the first run's token fired at the limit, then the retry ran"
    );
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the first run was dropped"
    );
    expect_none(&driver, &[], Duration::from_secs(2)).await;
    Outcome::Passed
}
