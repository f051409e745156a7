//! Scenarios of results, status, batches and workflows: results come back with their type, a
//! job's status moves through its states, a batch runs its callbacks once and only after its
//! last job, a chain passes results in order, a diamond starts its last step once with both
//! results. Each needs the driver's `jobs` facet and is skipped without it.

use std::time::{Duration, Instant};

use hermes_core::tracking::{
    Batch, BatchStatus, CallbackState, Chain, GroupRequest, JobRecord, JobState, ON_COMPLETE,
    ON_SUCCESS, RecordRequest, Settled, Step, StepState, Workflow, WorkflowState,
};
use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, DispatcherOptions, Driver, Emitter, Error, Job, JobContext,
    JsonSerializer, Message, RetryPolicy, Serializer as _,
};
use serde::{Deserialize, Serialize};

use super::processes::{Notes, Workers, serve_as_copy};
use super::support::{PATIENCE, open};
use super::{Harness, Outcome};

/// A job whose result is its square, with a note.
#[derive(Debug, Serialize, Deserialize)]
struct Square {
    n: u64,
}
impl Job for Square {
    const TYPE: &'static str = "square";
}

/// The result of a [`Square`].
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Squared {
    square: u64,
    note: String,
}

/// A job that waits until the scenario notes `release <id>`, reporting progress meanwhile;
/// with `fail`, it then fails (retried once, after a second).
#[derive(Debug, Serialize, Deserialize)]
struct Hold {
    fail: bool,
}
impl Job for Hold {
    const TYPE: &'static str = "hold";
    fn retry_policy() -> Option<RetryPolicy> {
        Some(RetryPolicy::fixed(Duration::from_secs(30), 1))
    }
}

/// A member of a batch: noted as `item <batch>`; fails for good when `fail`.
#[derive(Debug, Serialize, Deserialize)]
struct Item {
    i: u32,
    fail: bool,
}
impl Job for Item {
    const TYPE: &'static str = "item";
}

/// A batch's callback: noted as `<label> <batch> <items of the batch noted then>`.
#[derive(Debug, Serialize, Deserialize)]
struct BatchDone {
    label: String,
}
impl Job for BatchDone {
    const TYPE: &'static str = "batch-done";
}

/// The first step of the chain.
#[derive(Debug, Serialize, Deserialize)]
struct Start {
    n: u64,
    fail_at: Option<String>,
}
impl Job for Start {
    const TYPE: &'static str = "chain-start";
}
impl Step for Start {
    type Output = Middle;
}

/// The second step of the chain.
#[derive(Debug, Serialize, Deserialize)]
struct Middle {
    n: u64,
    path: Vec<String>,
    fail_at: Option<String>,
}
impl Job for Middle {
    const TYPE: &'static str = "chain-middle";
}
impl Step for Middle {
    type Output = End;
}

/// The last step of the chain.
#[derive(Debug, Serialize, Deserialize)]
struct End {
    n: u64,
    path: Vec<String>,
}
impl Job for End {
    const TYPE: &'static str = "chain-end";
}
impl Step for End {
    type Output = Total;
}

/// What the chain comes to.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Total {
    n: u64,
    path: Vec<String>,
}

/// The top of the diamond.
#[derive(Debug, Serialize, Deserialize)]
struct Top {
    n: u64,
}
impl Job for Top {
    const TYPE: &'static str = "diamond-top";
}
impl Step for Top {
    type Output = Side;
}

/// Either side of the diamond: `2n`, plus one on the step named `right`.
#[derive(Debug, Serialize, Deserialize)]
struct Side {
    n: u64,
}
impl Job for Side {
    const TYPE: &'static str = "diamond-side";
}

/// The bottom of the diamond: both sides' results by step name.
#[derive(Debug, Serialize, Deserialize)]
struct Bottom {
    left: u64,
    right: u64,
}
impl Job for Bottom {
    const TYPE: &'static str = "diamond-bottom";
}

/// The worker of these scenarios: every job type above, four at a time.
fn tracking_worker<D: Driver>(driver: D, notes: Notes) -> Dispatcher {
    let mut options = DispatcherOptions::default();
    options.concurrency = 4;
    options.max_result_size = 4096;
    let mut dispatcher = Dispatcher::new(driver).options(options);
    dispatcher.register_job(|job: Square, _ctx: JobContext| async move {
        if job.n == 0 {
            // Over the bound of 4096 bytes.
            return Ok::<_, Error>(Squared {
                square: 0,
                note: "x".repeat(5000),
            });
        }
        Ok(Squared {
            square: job.n * job.n,
            note: format!("{} squared", job.n),
        })
    });
    let held = notes.clone();
    dispatcher.register_job(move |job: Hold, ctx: JobContext| {
        let notes = held.clone();
        async move {
            ctx.progress(40, Some("halfway")).await?;
            let release = format!("release {}", ctx.id());
            while !notes.read().contains(&release) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            if job.fail {
                return Err(Error::InvalidResult("held and failed".into()));
            }
            Ok(())
        }
    });
    let items = notes.clone();
    dispatcher.register_job(move |job: Item, ctx: JobContext| {
        let notes = items.clone();
        async move {
            notes.push(format!("item {}", ctx.group().unwrap_or("-")));
            if job.fail {
                return Err(format!("item {} fails", job.i));
            }
            Ok(job.i)
        }
    });
    let callbacks = notes.clone();
    dispatcher.register_job(move |job: BatchDone, ctx: JobContext| {
        let notes = callbacks.clone();
        async move {
            if job.label == "slow" {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            let batch = ctx.group().unwrap_or("-").to_owned();
            let items = notes
                .read()
                .iter()
                .filter(|line| **line == format!("item {batch}"))
                .count();
            notes.push(format!("{} {batch} {items}", job.label));
            Ok::<_, Error>(())
        }
    });
    let steps = notes.clone();
    dispatcher.register_step(move |job: Start, ctx: JobContext| {
        let notes = steps.clone();
        async move {
            notes.push(format!("step start {}", ctx.id()));
            if job.fail_at.as_deref() == Some("start") {
                return Err("the start fails".to_owned());
            }
            Ok(Middle {
                n: job.n + 1,
                path: vec!["start".into()],
                fail_at: job.fail_at,
            })
        }
    });
    let steps = notes.clone();
    dispatcher.register_step(move |job: Middle, ctx: JobContext| {
        let notes = steps.clone();
        async move {
            notes.push(format!("step middle {}", ctx.id()));
            if job.fail_at.as_deref() == Some("middle") {
                return Err("the middle fails".to_owned());
            }
            let mut path = job.path;
            path.push("middle".into());
            Ok(End {
                n: job.n * 10,
                path,
            })
        }
    });
    let steps = notes.clone();
    dispatcher.register_step(move |job: End, ctx: JobContext| {
        let notes = steps.clone();
        async move {
            notes.push(format!("step end {}", ctx.id()));
            let mut path = job.path;
            path.push("end".into());
            Ok::<_, String>(Total { n: job.n + 7, path })
        }
    });
    dispatcher.register_step(|job: Top, _ctx: JobContext| async move {
        Ok::<_, String>(Side { n: job.n })
    });
    dispatcher.register_job(|job: Side, ctx: JobContext| async move {
        let right = u64::from(ctx.id().ends_with(".right"));
        Ok::<_, String>(job.n * 2 + right)
    });
    let bottoms = notes;
    dispatcher.register_job(move |job: Bottom, ctx: JobContext| {
        let notes = bottoms.clone();
        async move {
            notes.push(format!("bottom {} {} {}", ctx.id(), job.left, job.right));
            Ok::<_, String>(job.left + job.right)
        }
    });
    dispatcher
}

/// Waits until `check` gives `Some`, every 20 ms, for at most `within`.
async fn eventually<T, F, Fut>(within: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = check().await {
            return Some(found);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Opens the emitter of a scenario, or says it is skipped without the `jobs` facet (which a
/// driver without it refuses plainly).
async fn emitter_or_skip<H: Harness>(h: &H, queue: &str) -> Result<Emitter, Outcome> {
    let emitter = Emitter::new(open(h, queue).await);
    if emitter.driver().jobs().is_some() {
        return Ok(emitter);
    }
    let refused = emitter.status("any").await;
    assert!(
        matches!(refused, Err(Error::Unsupported { .. })),
        "a driver without the `jobs` facet refuses to read a status: {refused:?}"
    );
    Err(Outcome::lacks_facet("jobs"))
}

/// A handler's value comes back by id with its type, from any instance; read as a type it
/// does not fit, the error names the path and not the value; a result over the bound fails
/// the job for good, with the sizes.
pub async fn results_round_trip_with_their_type<H: Harness>(h: &H, queue: &str) -> Outcome {
    if serve_as_copy(h, queue, tracking_worker).await {
        return Outcome::Passed;
    }
    let emitter = match emitter_or_skip(h, queue).await {
        Ok(emitter) => emitter,
        Err(skipped) => return skipped,
    };
    let id = emitter.emit_job(&Square { n: 12 }).await.expect("an emit");
    let too_large = emitter.emit_job(&Square { n: 0 }).await.expect("an emit");
    let (workers, _notes) = Workers::start(h, queue, 1, tracking_worker).await;
    let reader = Emitter::new(open(h, queue).await);
    let squared: Squared = reader.wait_for(&id, PATIENCE).await.expect("the result");
    assert_eq!(
        squared,
        Squared {
            square: 144,
            note: "12 squared".into()
        }
    );
    assert_eq!(
        reader.result::<Squared>(&id).await.expect("a read"),
        Some(squared)
    );
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Wrong {
        note: u64,
    }
    let error = reader.result::<Wrong>(&id).await.expect_err("a mismatch");
    let text = error.to_string();
    assert!(
        matches!(error, Error::InvalidResult(_))
            && text.contains("note")
            && !text.contains("12 squared"),
        "the error names the path, not the value: {text}"
    );
    let record = eventually(PATIENCE, || async {
        let record = reader.status(&too_large).await.expect("a status")?;
        record.state.is_final().then_some(record)
    })
    .await
    .expect("the job with the large result is done");
    assert_eq!(
        record.state,
        JobState::Dead,
        "a result over the bound fails the job"
    );
    let error = record.error.unwrap_or_default();
    assert!(
        error.contains("5") && error.contains("4096") && !error.contains("xxxx"),
        "the error gives the sizes, not the result: {error}"
    );
    assert_eq!(record.result, None);
    workers.stop().await;
    Outcome::Passed
}

/// A tracked job is waiting, then running on a worker with its progress, then succeeded; a
/// failing one is retrying with its next attempt, then dead after its last; a delayed one is
/// delayed.
pub async fn status_moves_through_its_states<H: Harness>(h: &H, queue: &str) -> Outcome {
    if serve_as_copy(h, queue, tracking_worker).await {
        return Outcome::Passed;
    }
    let emitter = match emitter_or_skip(h, queue).await {
        Ok(emitter) => emitter,
        Err(skipped) => return skipped,
    };
    let held = Message::from_job(&Hold { fail: false }).expect("a message");
    emitter
        .emit_tracked(&held, DEFAULT_PRIORITY)
        .await
        .expect("an emit");
    let record = emitter.status(held.id()).await.expect("a status");
    assert_eq!(record.map(|r| r.state), Some(JobState::Waiting));
    if emitter.driver().capabilities().delay {
        let later = Message::builder(Hold::TYPE)
            .payload(&Hold { fail: false })
            .delay(Duration::from_secs(3600))
            .build()
            .expect("a message");
        emitter
            .emit_tracked(&later, DEFAULT_PRIORITY)
            .await
            .expect("an emit");
        let record = emitter.status(later.id()).await.expect("a status");
        assert_eq!(record.map(|r| r.state), Some(JobState::Delayed));
    }

    let (workers, notes) = Workers::start(h, queue, 1, tracking_worker).await;
    let running = eventually(PATIENCE, || async {
        let record = emitter.status(held.id()).await.expect("a status")?;
        (record.state == JobState::Running && record.progress.is_some()).then_some(record)
    })
    .await
    .expect("the held job shows as running, with its progress");
    assert!(running.worker.is_some() && running.started.is_some());
    let progress = running.progress.expect("progress");
    assert_eq!(
        (progress.percent, progress.note.as_deref()),
        (40, Some("halfway"))
    );
    notes.push(format!("release {}", held.id()));
    let done = eventually(PATIENCE, || async {
        let record = emitter.status(held.id()).await.expect("a status")?;
        record.state.is_final().then_some(record)
    })
    .await
    .expect("the held job is done");
    assert_eq!(done.state, JobState::Succeeded);
    assert!(done.finished.is_some());

    let failing = Message::from_job(&Hold { fail: true }).expect("a message");
    emitter
        .emit_tracked(&failing, DEFAULT_PRIORITY)
        .await
        .expect("an emit");
    notes.push(format!("release {}", failing.id()));
    let retrying = eventually(PATIENCE, || async {
        let record = emitter.status(failing.id()).await.expect("a status")?;
        (record.state == JobState::Retrying).then_some(record)
    })
    .await
    .expect("the failing job is retrying");
    assert!(
        retrying
            .next_attempt
            .is_some_and(|at| at > hermes_core::time::unix_now() + 10.0),
        "it says when it runs again"
    );
    assert!(
        retrying
            .error
            .is_some_and(|e| e.contains("held and failed"))
    );
    workers.stop().await;
    Outcome::Passed
}

/// Emits a batch of `items` jobs (those in `failing` fail for good) with both callbacks, runs
/// two workers, and returns the batch's id and the notes once the batch's callbacks are done.
async fn run_batch<H: Harness>(
    h: &H,
    queue: &str,
    emitter: &Emitter,
    items: u32,
    failing: &[u32],
) -> (String, Vec<String>, Notes, Workers) {
    let batch = Batch::new()
        .on_success(&BatchDone {
            label: "success".into(),
        })
        .on_complete(&BatchDone {
            label: "complete".into(),
        })
        .description("the suite's batch");
    let jobs: Vec<Item> = (0..items)
        .map(|i| Item {
            i,
            fail: failing.contains(&i),
        })
        .collect();
    let (workers, notes) = Workers::start(h, queue, 2, tracking_worker).await;
    let open = emitter.open_batch(batch).await.expect("a batch");
    let id = open.id().to_owned();
    let (first, rest) = jobs.split_at(1);
    let mut members = open.add(first).await.expect("a job of the batch");
    members.extend(open.add(rest).await.expect("the jobs of the batch"));
    open.close().await.expect("closing the batch");
    let done = eventually(PATIENCE * 3, || async {
        let status = emitter.batch_status(&id).await.expect("a batch status")?;
        (status.pending == 0 && status.on_complete == CallbackState::Done).then_some(())
    })
    .await;
    assert!(
        done.is_some(),
        "the batch and its on-complete callback are done: {:?}",
        emitter.batch_status(&id).await
    );
    (id, members, notes, workers)
}

/// Checks the store's own promises on a finished batch: settling a member again counts
/// nothing, and releasing a callback again queues nothing.
async fn settling_and_releasing_again_changes_nothing(emitter: &Emitter, id: &str, member: &str) {
    let store = emitter.driver().jobs().expect("the jobs facet");
    let before = store
        .group(id)
        .await
        .expect("a group")
        .expect("the batch")
        .tally;
    let again = store
        .settle(id, member, &Settled::Succeeded { result: None }, None)
        .await
        .expect("settling again");
    assert_eq!(
        again,
        Some((before, false)),
        "a member settled again is not counted again"
    );
    let callback = Message::new(BatchDone::TYPE);
    let released = store
        .release(id, ON_COMPLETE, &callback, DEFAULT_PRIORITY)
        .await
        .expect("releasing again");
    assert!(!released, "a callback released again is not queued again");
}

/// A batch of 100 jobs over two workers runs its success callback once, after its last job,
/// and its complete callback once; its status counts them.
pub async fn a_batch_runs_its_success_callback_once_after_its_last_job<H: Harness>(
    h: &H,
    queue: &str,
) -> Outcome {
    if serve_as_copy(h, queue, tracking_worker).await {
        return Outcome::Passed;
    }
    let emitter = match emitter_or_skip(h, queue).await {
        Ok(emitter) => emitter,
        Err(skipped) => return skipped,
    };
    let (id, members, notes, workers) = run_batch(h, queue, &emitter, 100, &[]).await;
    let success = eventually(PATIENCE, || async {
        let status = emitter.batch_status(&id).await.expect("a status")?;
        (status.on_success == CallbackState::Done).then_some(status)
    })
    .await
    .expect("the success callback is done");
    settling_and_releasing_again_changes_nothing(&emitter, &id, &members[99]).await;
    // A moment for a second run, if there were one.
    tokio::time::sleep(Duration::from_millis(300)).await;
    workers.stop().await;
    let lines = notes.read();
    let items = lines.iter().filter(|l| **l == format!("item {id}")).count();
    assert!(items >= 100, "every job ran: {items}");
    for label in ["success", "complete"] {
        let runs: Vec<&String> = lines
            .iter()
            .filter(|l| l.starts_with(&format!("{label} {id} ")))
            .collect();
        assert_eq!(runs.len(), 1, "the {label} callback ran once: {runs:?}");
        let seen: usize = runs[0]
            .rsplit(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(
            seen >= 100,
            "the {label} callback ran after the last job: it saw {seen} of 100"
        );
    }
    assert_eq!(
        (
            success.total,
            success.succeeded,
            success.failed,
            success.pending,
            success.open
        ),
        (100, 100, 0, 0, false)
    );
    assert!(success.finished.is_some());
    let callback = emitter
        .status(&BatchStatus::callback_id(&id, ON_SUCCESS))
        .await
        .expect("a status")
        .expect("the callback's record");
    assert_eq!(callback.state, JobState::Succeeded);
    Outcome::Passed
}

/// Two copies of a batch's callback queued at once (what a worker killed between queueing it
/// and marking it released leaves, or one killed between publishing it to a broker and
/// confirming it) run once: the copy that claims the run first runs it, the other is
/// acknowledged without running.
pub async fn a_second_copy_of_a_released_message_does_not_run<H: Harness>(
    h: &H,
    queue: &str,
) -> Outcome {
    if serve_as_copy(h, queue, tracking_worker).await {
        return Outcome::Passed;
    }
    let emitter = match emitter_or_skip(h, queue).await {
        Ok(emitter) => emitter,
        Err(skipped) => return skipped,
    };
    // Left open, so the callback can come only from the copies below.
    let open = emitter
        .open_batch(Batch::new().on_success(&BatchDone {
            label: "slow".into(),
        }))
        .await
        .expect("a batch");
    let id = open.id().to_owned();
    let callback = BatchStatus::callback_id(&id, ON_SUCCESS);
    for created in [1_700_000_000, 1_700_000_001] {
        let bytes = format!(
            r#"{{"message":{{"id":"{callback}","type":"{}","created":{created},"payload":{{"label":"slow"}},"execute_at":null,"retries":0,"group":"{id}"}}}}"#,
            BatchDone::TYPE
        );
        let copy = JsonSerializer
            .deserialize(bytes.as_bytes())
            .expect("a copy of the callback");
        emitter
            .emit(&copy, DEFAULT_PRIORITY)
            .await
            .expect("a copy queued");
    }
    let (workers, notes) = Workers::start(h, queue, 2, tracking_worker).await;
    let ran = format!("slow {id} ");
    let first = eventually(PATIENCE, || async {
        notes
            .read()
            .iter()
            .any(|l| l.starts_with(&ran))
            .then_some(())
    })
    .await;
    assert!(first.is_some(), "a copy of the callback ran");
    // Time for the other copy to run, if it were let.
    tokio::time::sleep(Duration::from_millis(800)).await;
    workers.stop().await;
    let runs = notes.read().iter().filter(|l| l.starts_with(&ran)).count();
    assert_eq!(runs, 1, "two copies of a callback run once");
    Outcome::Passed
}

/// A batch with one job that fails for good runs its complete callback once and never its
/// success callback; its status counts the failure.
pub async fn a_batch_with_a_dead_job_completes_without_success<H: Harness>(
    h: &H,
    queue: &str,
) -> Outcome {
    if serve_as_copy(h, queue, tracking_worker).await {
        return Outcome::Passed;
    }
    let emitter = match emitter_or_skip(h, queue).await {
        Ok(emitter) => emitter,
        Err(skipped) => return skipped,
    };
    let (id, members, notes, workers) = run_batch(h, queue, &emitter, 6, &[3]).await;
    settling_and_releasing_again_changes_nothing(&emitter, &id, &members[3]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    workers.stop().await;
    let lines = notes.read();
    let completes = lines
        .iter()
        .filter(|l| l.starts_with(&format!("complete {id} ")))
        .count();
    let successes = lines
        .iter()
        .filter(|l| l.starts_with(&format!("success {id} ")))
        .count();
    assert_eq!(
        (completes, successes),
        (1, 0),
        "complete once, success never"
    );
    let status = emitter
        .batch_status(&id)
        .await
        .expect("a status")
        .expect("the batch");
    assert_eq!(
        (
            status.total,
            status.succeeded,
            status.failed,
            status.pending
        ),
        (6, 5, 1, 0)
    );
    assert_eq!(status.on_success, CallbackState::Waiting);
    assert_eq!(
        emitter
            .status(&BatchStatus::callback_id(&id, ON_COMPLETE))
            .await
            .expect("a status")
            .map(|r| r.state),
        Some(JobState::Succeeded)
    );
    Outcome::Passed
}

/// A chain of three typed steps passes each result to the next, in order, each step once;
/// the chain's result is its last step's. A chain whose middle step fails stops there: the
/// workflow is failed naming that step, and the last step never runs.
pub async fn a_three_step_chain_passes_results_in_order<H: Harness>(h: &H, queue: &str) -> Outcome {
    if serve_as_copy(h, queue, tracking_worker).await {
        return Outcome::Passed;
    }
    let emitter = match emitter_or_skip(h, queue).await {
        Ok(emitter) => emitter,
        Err(skipped) => return skipped,
    };
    let chain = |fail_at: Option<&str>| {
        Chain::new(&Start {
            n: 4,
            fail_at: fail_at.map(str::to_owned),
        })
        .and_then(|c| c.then::<Middle>())
        .and_then(|c| c.then::<End>())
        .expect("a chain")
    };
    let good = chain(None);
    let last = good.last_step();
    let good = emitter
        .emit_workflow(&good.into_workflow())
        .await
        .expect("a chain");
    let bad = emitter
        .emit_workflow(&chain(Some("middle")).into_workflow())
        .await
        .expect("a chain");
    let (workers, notes) = Workers::start(h, queue, 2, tracking_worker).await;
    let total: Total = emitter
        .wait_for(&format!("{good}.{last}"), PATIENCE * 2)
        .await
        .expect("the chain's result");
    assert_eq!(
        total,
        Total {
            n: (4 + 1) * 10 + 7,
            path: vec!["start".into(), "middle".into(), "end".into()]
        }
    );
    // Failed as soon as its middle step is; done once the last step is settled as skipped.
    let failed = eventually(PATIENCE, || async {
        let status = emitter.workflow_status(&bad).await.expect("a status")?;
        (status.state != WorkflowState::Running && status.finished.is_some()).then_some(status)
    })
    .await
    .expect("the failing chain is done");
    assert_eq!(failed.state, WorkflowState::Failed { step: "2".into() });
    assert_eq!(
        failed.steps[2].state,
        StepState::Skipped { after: "2".into() }
    );
    let status = emitter
        .workflow_status(&good)
        .await
        .expect("a status")
        .expect("the chain");
    assert_eq!(status.state, WorkflowState::Succeeded);
    tokio::time::sleep(Duration::from_millis(300)).await;
    workers.stop().await;
    let lines = notes.read();
    for (step, name) in [("start", "1"), ("middle", "2"), ("end", "3")] {
        let runs = lines
            .iter()
            .filter(|l| **l == format!("step {step} {good}.{name}"))
            .count();
        assert_eq!(runs, 1, "step {step} of the chain ran once");
    }
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with(&format!("step end {bad}"))),
        "the failed chain's last step never ran"
    );
    Outcome::Passed
}

/// A diamond (top → left, right → bottom) starts its bottom once, with both sides' results
/// by step name.
pub async fn a_diamond_starts_its_last_step_once_with_both_results<H: Harness>(
    h: &H,
    queue: &str,
) -> Outcome {
    if serve_as_copy(h, queue, tracking_worker).await {
        return Outcome::Passed;
    }
    let emitter = match emitter_or_skip(h, queue).await {
        Ok(emitter) => emitter,
        Err(skipped) => return skipped,
    };
    let mut flow = Workflow::new().description("the suite's diamond");
    let top = flow.start("top", &Top { n: 21 }).expect("a step");
    let left = flow.then::<Side, _>("left", top).expect("a step");
    let right = flow.then::<Side, _>("right", top).expect("a step");
    flow.after_all::<Bottom>("bottom", &[left.into(), right.into()])
        .expect("a step");
    let id = emitter.emit_workflow(&flow).await.expect("a workflow");
    let (workers, notes) = Workers::start(h, queue, 2, tracking_worker).await;
    let sum: u64 = emitter
        .wait_for(&format!("{id}.bottom"), PATIENCE * 2)
        .await
        .expect("the bottom's result");
    assert_eq!(sum, 42 + 43);
    let store = emitter.driver().jobs().expect("the jobs facet");
    let again = store
        .release(&id, "bottom", &Message::new(Bottom::TYPE), DEFAULT_PRIORITY)
        .await
        .expect("releasing again");
    assert!(!again, "a step released again is not queued again");
    tokio::time::sleep(Duration::from_millis(300)).await;
    workers.stop().await;
    let bottoms: Vec<String> = notes
        .read()
        .into_iter()
        .filter(|l| l.starts_with("bottom "))
        .collect();
    assert_eq!(
        bottoms,
        vec![format!("bottom {id}.bottom 42 43")],
        "the bottom ran once, with both results"
    );
    let status = emitter
        .workflow_status(&id)
        .await
        .expect("a status")
        .expect("the workflow");
    assert_eq!(status.state, WorkflowState::Succeeded);
    assert!(status.steps.iter().all(|s| s.state == StepState::Succeeded));
    Outcome::Passed
}

/// The records kept, walked a page at a time from the first through each cursor, meet each
/// record of the queue once (those stored by `put` and by a settle alike), the one kept longest
/// first, and no more than the limit at a time, filtered by state, priority and type when
/// asked; a cursor the backend did not give is refused.
pub async fn kept_records_are_met_once_by_pages<H: Harness>(h: &H, queue: &str) -> Outcome {
    let emitter = match emitter_or_skip(h, queue).await {
        Ok(emitter) => emitter,
        Err(skipped) => return skipped,
    };
    let store = emitter.driver().jobs().expect("the jobs facet");
    let keep = Duration::from_secs(600);
    let mut stored = Vec::new();
    for n in 0..23u32 {
        let state = if n % 4 == 0 {
            JobState::Dead
        } else {
            JobState::Succeeded
        };
        let kind = if n % 3 == 0 { "listed.a" } else { "listed.b" };
        let priority = if n % 5 == 0 { 200 } else { DEFAULT_PRIORITY };
        let record = JobRecord::new(format!("{queue}-listed-{n}"), kind, priority, state);
        store.put(&record, keep).await.expect("a record stored");
        stored.push(record);
    }
    let open = emitter.open_batch(Batch::new()).await.expect("a batch");
    let members = open
        .add(&[Item { i: 0, fail: false }])
        .await
        .expect("a member");
    let settled = JobRecord::new(
        &members[0],
        Item::TYPE,
        DEFAULT_PRIORITY,
        JobState::Succeeded,
    );
    store
        .settle(
            open.id(),
            &members[0],
            &Settled::Succeeded { result: None },
            Some((&settled, keep)),
        )
        .await
        .expect("a settle with its record");
    stored.push(settled);
    // Stored last and kept longest: first in every backend's order.
    let newest = JobRecord::new(
        format!("{queue}-listed-newest"),
        "listed.b",
        DEFAULT_PRIORITY,
        JobState::Cancelled,
    );
    store.put(&newest, keep * 2).await.expect("a record stored");
    stored.push(newest.clone());

    let walk = |request: RecordRequest| async move {
        let mut met: Vec<String> = Vec::new();
        let mut request = request;
        for _ in 0..200 {
            let page = store.records(&request).await.expect("a page of records");
            assert!(
                page.records.len() <= request.limit,
                "{} records on a page of {}",
                page.records.len(),
                request.limit
            );
            met.extend(page.records.iter().map(|r| r.id.clone()));
            match page.next {
                Some(next) => request = request.after(next),
                None => return met,
            }
        }
        panic!("the pages never ended");
    };
    let sorted = |mut ids: Vec<String>| {
        ids.sort();
        ids
    };
    let expected = |pick: &dyn Fn(&JobRecord) -> bool| {
        sorted(
            stored
                .iter()
                .filter(|r| pick(r))
                .map(|r| r.id.clone())
                .collect(),
        )
    };
    let all = walk(RecordRequest::new(5)).await;
    assert_eq!(all.len(), stored.len(), "each record once: {all:?}");
    assert_eq!(all[0], newest.id, "the record kept longest first");
    assert_eq!(
        sorted(all),
        expected(&|_| true),
        "every record of the queue"
    );
    let succeeded = walk(RecordRequest::new(4).in_state(JobState::Succeeded)).await;
    assert_eq!(
        sorted(succeeded),
        expected(&|r| r.state == JobState::Succeeded),
        "only and every succeeded record"
    );
    let of_a = walk(RecordRequest::new(3).of_type("listed.a").of_priority(200)).await;
    assert_eq!(
        sorted(of_a),
        expected(&|r| r.message_type == "listed.a" && r.priority == 200),
        "only and every record of the type and priority"
    );
    let refused = store
        .records(&RecordRequest::new(5).after("no such cursor"))
        .await;
    assert!(
        refused.is_err(),
        "a cursor the backend did not give is refused: {refused:?}"
    );
    Outcome::Passed
}

/// The batches and workflows kept, walked a page at a time from the first through each
/// cursor, meet each group of the queue once, the last opened first, with its counts; a cursor
/// the backend did not give is refused.
pub async fn kept_groups_are_met_once_by_pages<H: Harness>(h: &H, queue: &str) -> Outcome {
    let emitter = match emitter_or_skip(h, queue).await {
        Ok(emitter) => emitter,
        Err(skipped) => return skipped,
    };
    let store = emitter.driver().jobs().expect("the jobs facet");
    let mut opened = Vec::new();
    for n in 0..7u32 {
        let open = emitter
            .open_batch(Batch::new().description(format!("listed {n}")))
            .await
            .expect("a batch");
        open.add(&[Item { i: n, fail: false }])
            .await
            .expect("a member");
        opened.push(open.id().to_owned());
        // Opened in turn: each is created after the one before.
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let mut met = Vec::new();
    let mut request = GroupRequest::new(3);
    for _ in 0..100 {
        let page = store.groups(&request).await.expect("a page of groups");
        assert!(
            page.groups.len() <= 3,
            "{} groups on a page of 3",
            page.groups.len()
        );
        met.extend(page.groups);
        match page.next {
            Some(next) => request = request.after(next),
            None => break,
        }
    }
    let ids: Vec<&str> = met.iter().map(|g| g.spec.id.as_str()).collect();
    let expected: Vec<&str> = opened.iter().rev().map(String::as_str).collect();
    assert_eq!(ids, expected, "each group once, the last opened first");
    assert!(
        met.iter()
            .all(|g| g.tally.total >= 1 && g.tally.pending() == g.tally.total),
        "each with its counts: {met:?}"
    );
    let refused = store
        .groups(&GroupRequest::new(3).after("no such cursor"))
        .await;
    assert!(
        refused.is_err(),
        "a cursor the backend did not give is refused: {refused:?}"
    );
    Outcome::Passed
}
