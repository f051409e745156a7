//! The `outage` role: the broker goes away under a worker process and an emitter, first for a
//! short while, then for longer than the worker's temporary-error timeout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_core::{DEFAULT_PRIORITY, Driver, Emitter, Message};
use rand::SeedableRng as _;
use rand::rngs::StdRng;

use crate::args::{DriverKind, OutageArgs, Sabotage};
use crate::broker::{Broker, recreate_sqs_queues};
use crate::ledger::Ledger;
use crate::payload::{SOAK, payload};
use crate::pool::{ProcessPool, Workers};
use crate::run::Outcome;
use crate::target::Target;

/// How long an emit to a broker that is down may take before the run calls it a hang.
const EMIT_BOUND: Duration = Duration::from_secs(30);
/// How soon after the broker is back the worker must handle a message.
const RESUME_BOUND: Duration = Duration::from_secs(10);

/// The figures of an outage run.
#[derive(Debug, Default)]
struct Figures {
    failed_emit: Option<Duration>,
    emits_again: Option<Duration>,
    resumed: Option<Duration>,
    exited: Option<(Duration, String)>,
}

/// Runs the outage `args` describes.
///
/// # Errors
/// A backend without a broker to stop, or a run that could not be set up.
pub async fn run(args: &OutageArgs) -> Result<Outcome, String> {
    let tag = format!("outage{}", std::process::id());
    let folder = std::env::temp_dir().join(format!("hermes-{tag}"));
    std::fs::create_dir_all(&folder).map_err(|e| format!("cannot create {folder:?}: {e}"))?;
    let (mut broker, target) =
        Broker::for_outage(args.driver, &folder, &tag, Duration::from_secs(30))?;
    let driver = target.connect(1).await.map_err(|e| e.to_string())?;
    let log = folder.join("handled.log");
    let mut pool = ProcessPool::new(target.clone(), 1, &log, &folder, 1, Sabotage::default())
        .error_timeout(args.error_timeout);
    pool.spawn()?;

    let mut failures = Vec::new();
    let figures = outages(
        args,
        &mut broker,
        &target,
        &driver,
        &mut pool,
        &log,
        &mut failures,
    )
    .await;
    failures.extend(pool.stop(Duration::from_secs(30)));
    drop(driver);
    broker.clean_up(&target).await;

    let seconds =
        |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()));
    let exited = figures.exited.as_ref().map_or_else(
        || "did not exit".to_owned(),
        |(after, why)| format!("exits after {:.1} s: {why}", after.as_secs_f64()),
    );
    let summary = format!(
        "outage {}: a failed emit returns after {}; after {:.0} s down the worker handles again \
         {} after the broker is back, emits succeed again after {}; down past the {:.0} s \
         error timeout, the worker {exited}",
        args.driver.name(),
        seconds(figures.failed_emit),
        args.down_for.as_secs_f64(),
        seconds(figures.resumed),
        seconds(figures.emits_again),
        args.error_timeout.as_secs_f64(),
    );
    let kept = !failures.is_empty();
    if !kept {
        let _ = std::fs::remove_dir_all(&folder);
    }
    Ok(Outcome {
        summary,
        failures,
        folder: kept.then_some(folder),
    })
}

async fn outages(
    args: &OutageArgs,
    broker: &mut Broker,
    target: &Target,
    driver: &Arc<dyn Driver>,
    pool: &mut ProcessPool,
    log: &std::path::Path,
    failures: &mut Vec<String>,
) -> Figures {
    let mut figures = Figures::default();
    let emitter = Emitter::from_arc(driver.clone());
    let mut rng = StdRng::seed_from_u64(1);
    let mut ledger = Ledger::new(log);
    let mut emit = async |seq: u64| {
        let message = Message::builder(SOAK)
            .payload(&payload(seq, &mut rng))
            .build()
            .expect("a valid message");
        emitter.emit(&message, DEFAULT_PRIORITY).await
    };

    if let Err(e) = emit(0).await {
        failures.push(format!("the first emit failed: {e}"));
        return figures;
    }
    if wait_handled(&mut ledger, 0, Duration::from_secs(30))
        .await
        .is_none()
    {
        failures.push("the worker did not handle the first message".to_owned());
        return figures;
    }

    // A short outage.
    if let Err(e) = broker.stop() {
        failures.push(e);
        return figures;
    }
    let down = Instant::now();
    match tokio::time::timeout(EMIT_BOUND, emit(1)).await {
        Ok(Ok(())) => failures.push("an emit returned Ok while the broker was down".to_owned()),
        Ok(Err(e)) => {
            figures.failed_emit = Some(down.elapsed());
            eprintln!("hermes-soak: the failed emit: {e}");
        }
        Err(_) => failures.push(format!(
            "an emit hung for {EMIT_BOUND:?} while the broker was down"
        )),
    }
    tokio::time::sleep(args.down_for.saturating_sub(down.elapsed())).await;
    if let Err(e) = start(broker, target).await {
        failures.push(e);
        return figures;
    }
    let up = Instant::now();
    loop {
        if emit(2).await.is_ok() {
            figures.emits_again = Some(up.elapsed());
            break;
        }
        if up.elapsed() > EMIT_BOUND {
            failures.push(format!(
                "emits still fail {EMIT_BOUND:?} after the broker is back"
            ));
            return figures;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    match wait_handled(&mut ledger, 2, RESUME_BOUND).await {
        Some(_) => figures.resumed = Some(up.elapsed()),
        None => failures.push(format!(
            "the worker did not handle a message within {RESUME_BOUND:?} of the broker's return"
        )),
    }
    if let Some(reason) = pool.exited().into_iter().next() {
        failures.push(format!("during the short outage: {reason}"));
        return figures;
    }

    // A long outage: the worker gives up with an error after its timeout.
    if let Err(e) = broker.stop() {
        failures.push(e);
        return figures;
    }
    let down = Instant::now();
    let bound = args.error_timeout + Duration::from_secs(30);
    while down.elapsed() < bound {
        if let Some(reason) = pool.exited().into_iter().next() {
            let output = pool
                .output_of(1)
                .and_then(|path| std::fs::read_to_string(path).ok())
                .unwrap_or_default();
            let last = output
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            if reason.ends_with("exit status: 0") {
                failures.push(format!(
                    "the worker exited with success in an outage: {reason}"
                ));
            }
            let status = reason
                .split_once("exited by itself: ")
                .map_or(reason.as_str(), |(_, status)| status)
                .to_owned();
            figures.exited = Some((down.elapsed(), format!("{status}, \"{}\"", last.trim())));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if figures.exited.is_none() {
        failures.push(format!(
            "the worker did not exit within {bound:?} of the broker going away"
        ));
    }
    if let Err(e) = start(broker, target).await {
        failures.push(e);
    }
    figures
}

/// Starts the broker again; the SQS test server forgot its queues, which SQS keeps.
async fn start(broker: &mut Broker, target: &Target) -> Result<(), String> {
    broker.start()?;
    if target.kind == DriverKind::Sqs {
        recreate_sqs_queues(target).await?;
    }
    Ok(())
}

async fn wait_handled(ledger: &mut Ledger, seq: u64, within: Duration) -> Option<Instant> {
    let started = Instant::now();
    while started.elapsed() < within {
        let _ = ledger.read_new();
        if ledger.contains(seq) {
            return Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}
