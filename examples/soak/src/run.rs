//! One run: emit, handle under faults, wait for the queue to drain, stop the workers, look for
//! leftovers, and report.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_core::Driver;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom as _;
use rand::{Rng as _, SeedableRng as _};

use crate::args::{DriverKind, RunArgs, Sabotage};
use crate::broker::Broker;
use crate::emit::emit_all;
use crate::ledger::{Ledger, Sent};
use crate::pool::{ProcessPool, ThreadPool, Workers, memory_driver};
use crate::target::Target;

/// How a run ended.
#[derive(Debug)]
pub struct Outcome {
    /// The summary line.
    pub summary: String,
    /// What makes the run fail; empty when it passed.
    pub failures: Vec<String>,
    /// The run's folder, when kept.
    pub folder: Option<PathBuf>,
}

/// Faults done so far.
#[derive(Debug, Default)]
struct Faults {
    kills: u64,
    pauses: u64,
    restarts: u64,
}

/// Runs the soak `args` describes.
///
/// # Errors
/// A setting that cannot be used, or a run that could not be set up.
pub async fn run(args: &RunArgs) -> Result<Outcome, String> {
    let kind = args.driver.expect("required by the command line");
    let messages = args.messages.expect("required by the command line");
    if args.workers == 0 || args.concurrency == 0 {
        return Err("--workers and --concurrency must be at least 1".to_owned());
    }
    if kind == DriverKind::Sqs && args.visibility < Duration::from_secs(1) {
        return Err("--visibility: SQS counts it in whole seconds; give at least 1s".to_owned());
    }
    let seed = args.seed.unwrap_or_else(rand::random);
    let tag: String = format!("soak{}x{:08x}", std::process::id(), seed as u32);
    let folder = std::env::temp_dir().join(format!("hermes-{tag}"));
    std::fs::create_dir_all(&folder).map_err(|e| format!("cannot create {folder:?}: {e}"))?;
    eprintln!(
        "hermes-soak: driver {}, seed {seed}, folder {}",
        kind.name(),
        folder.display()
    );
    let (broker, target) = Broker::prepare(args, &folder, &tag)?;
    let broker = Arc::new(Mutex::new(broker));
    let log = folder.join("handled.log");

    let (driver, mut pool) = start_workers(
        &target,
        &PoolSettings {
            concurrency: args.concurrency,
            log: log.clone(),
            folder: folder.clone(),
            seed,
            sabotage: args.sabotage,
            limit: args.limit,
            groups: false,
        },
    )
    .await?;
    for _ in 0..args.workers {
        pool.spawn()?;
    }

    let started = Instant::now();
    let sent = Arc::new(Mutex::new(Sent::new(messages)));
    let emitting = tokio::spawn(emit_all(
        driver.clone(),
        messages,
        args.delayed_percent,
        seed,
        sent.clone(),
    ));
    let mut failures = Vec::new();
    let (faults, mut ledger) = soak(
        args,
        seed,
        &mut *pool,
        &broker,
        &log,
        &sent,
        &emitting,
        &mut failures,
    )
    .await;
    let emitted = emitting.await.map_err(|e| e.to_string())?;
    if emitted.failed > 0 {
        eprintln!(
            "hermes-soak: {} emits failed, the first with: {}",
            emitted.failed,
            emitted.first_error.as_deref().unwrap_or("?")
        );
    }

    failures.extend(pool.stop(Duration::from_secs(60)));
    drop(pool);
    // Claims of killed workers expire; anything still there then is a leftover.
    tokio::time::sleep(args.visibility + Duration::from_millis(500)).await;
    let leftovers = drain_leftovers(&*driver).await;
    let wall = started.elapsed();

    ledger
        .read_new()
        .map_err(|e| format!("cannot read the log: {e}"))?;
    let counts = ledger.counts(&sent.lock().expect("not poisoned"));
    match leftovers {
        Ok(0) => {}
        Ok(n) => failures.push(format!("{n} messages were left on the queue")),
        Err(e) => failures.push(format!("the queue could not be checked for leftovers: {e}")),
    }
    if counts.sent == 0 && messages > 0 {
        failures.push("no emit returned Ok".to_owned());
    }
    if counts.lost > 0 {
        let sent = sent.lock().expect("not poisoned");
        failures.push(format!(
            "{} messages emitted with Ok were lost: {}",
            counts.lost,
            ledger.lost(&sent, 10).join(", ")
        ));
    }
    if counts.corrupt > 0 {
        failures.push(format!("{} handlings were corrupt", counts.corrupt));
    }
    let duplicate_rate = 100.0 * counts.duplicates as f64 / counts.sent.max(1) as f64;
    eprintln!("hermes-soak: duplicate rate {duplicate_rate:.2}%");
    if let Some(max) = args.max_duplicates
        && duplicate_rate > max
    {
        failures.push(format!(
            "the duplicate rate {duplicate_rate:.2}% is above --max-duplicates {max}%"
        ));
    }
    let at_once = ledger.most_at_once();
    if let Some(limit) = args.limit
        && at_once > limit as usize
    {
        failures.push(format!(
            "{at_once} handlers ran at once, above --limit {limit}"
        ));
    }
    if counts.handled_unconfirmed > 0 {
        eprintln!(
            "hermes-soak: {} messages whose emit failed were handled all the same",
            counts.handled_unconfirmed
        );
    }
    let summary = format!(
        "sent {}, handled {} distinct, duplicates {}, lost {}, corrupt {}, at once {at_once}, \
         kills {}, pauses {}, restarts {}, wall {:.1} s",
        counts.sent,
        counts.handled,
        counts.duplicates,
        counts.lost,
        counts.corrupt,
        faults.kills,
        faults.pauses,
        faults.restarts,
        wall.as_secs_f64()
    );
    drop(driver);
    let mut broker = Arc::into_inner(broker)
        .expect("the restarts are done")
        .into_inner()
        .expect("not poisoned");
    let kept = args.keep || !failures.is_empty();
    if kept {
        eprintln!(
            "hermes-soak: the queue {} is kept on the broker",
            target.queue
        );
    } else {
        broker.clean_up(&target).await;
        let _ = std::fs::remove_dir_all(&folder);
    }
    Ok(Outcome {
        summary,
        failures,
        folder: kept.then_some(folder),
    })
}

/// How a run's workers run.
#[derive(Debug, Clone)]
pub(crate) struct PoolSettings {
    pub concurrency: usize,
    pub log: PathBuf,
    pub folder: PathBuf,
    pub seed: u64,
    pub sabotage: Sabotage,
    pub limit: Option<u32>,
    pub groups: bool,
}

/// A driver on `target` for the run itself, and a pool of its workers (none started yet):
/// threads of this process for the memory driver, processes of this program for the others.
pub(crate) async fn start_workers(
    target: &Target,
    settings: &PoolSettings,
) -> Result<(Arc<dyn Driver>, Box<dyn Workers>), String> {
    let PoolSettings {
        concurrency,
        log,
        folder,
        seed,
        sabotage,
        limit,
        groups,
    } = settings.clone();
    if target.kind == DriverKind::Memory {
        let memory = memory_driver(target)?;
        let pool = ThreadPool::new(memory.reopen(), concurrency, &log, seed, sabotage)
            .limited(limit)
            .groups(groups);
        Ok((Arc::new(memory), Box::new(pool)))
    } else {
        let driver = target
            .connect(concurrency)
            .await
            .map_err(|e| e.to_string())?;
        let pool = ProcessPool::new(target.clone(), concurrency, &log, &folder, seed, sabotage)
            .limited(limit)
            .groups(groups);
        Ok((driver, Box::new(pool)))
    }
}

/// The time between faults, and when the next one is due.
#[derive(Debug)]
pub(crate) struct Every {
    period: Option<Duration>,
    next: Instant,
}

impl Every {
    pub(crate) fn new(period: Option<Duration>, rng: &mut StdRng) -> Self {
        let period = period.filter(|p| !p.is_zero());
        // The first fault comes at a random point of the first period.
        let first = period.map_or(Duration::ZERO, |p| p.mul_f64(rng.random_range(0.5..1.0)));
        Every {
            period,
            next: Instant::now() + first,
        }
    }

    pub(crate) fn due(&mut self) -> bool {
        match self.period {
            Some(period) if Instant::now() >= self.next => {
                self.next += period;
                true
            }
            _ => false,
        }
    }
}

/// Handles under faults until every message emitted with Ok was handled and nothing new was
/// handled for longer than a claim lasts, or until nothing is handled for the stall timeout.
/// Returns the faults done and the ledger of the log as read so far.
#[allow(clippy::too_many_arguments)]
async fn soak(
    args: &RunArgs,
    seed: u64,
    pool: &mut dyn Workers,
    broker: &Arc<Mutex<Broker>>,
    log: &std::path::Path,
    sent: &Arc<Mutex<Sent>>,
    emitting: &tokio::task::JoinHandle<crate::emit::EmitReport>,
    failures: &mut Vec<String>,
) -> (Faults, Ledger) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut faults = Faults::default();
    let mut kills = Every::new(Some(args.kill_every), &mut rng);
    let mut pauses = Every::new(args.pause_every, &mut rng);
    let mut restarts = Every::new(args.broker_restart_every, &mut rng);
    let pause_for = args.visibility + Duration::from_secs(1);
    let quiet = args.visibility + Duration::from_secs(1);
    let mut paused: Option<(u64, Instant)> = None;
    let mut restarting: Option<tokio::task::JoinHandle<Result<(), String>>> = None;
    let mut ledger = Ledger::new(log);
    let mut last_new = Instant::now();
    let mut drained = false;
    let started = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        match ledger.read_new() {
            Ok(0) => {}
            Ok(_) => last_new = Instant::now(),
            Err(e) => {
                failures.push(format!("cannot read the log: {e}"));
                break;
            }
        }
        pool.replace_exited(failures);
        if let Some((id, until)) = paused
            && (drained || Instant::now() >= until)
        {
            pool.freeze(id, false);
            paused = None;
        }
        if restarting.as_ref().is_some_and(|r| r.is_finished()) {
            match restarting.take().expect("checked").await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failures.push(format!("the broker restart failed: {e}")),
                Err(e) => failures.push(format!("the broker restart panicked: {e}")),
            }
        }
        if !drained && emitting.is_finished() {
            drained = ledger.has_all(&sent.lock().expect("not poisoned"));
            if drained {
                eprintln!(
                    "hermes-soak: all {} handled after {:.1} s; waiting for stragglers",
                    ledger.distinct(),
                    started.elapsed().as_secs_f64()
                );
            }
        }
        if drained && paused.is_none() && restarting.is_none() && last_new.elapsed() >= quiet {
            break;
        }
        if last_new.elapsed() >= args.stall_timeout && restarting.is_none() {
            failures.push(format!(
                "nothing was handled for {:?}; {} distinct messages handled",
                args.stall_timeout,
                ledger.distinct()
            ));
            break;
        }
        if drained {
            continue;
        }
        let running = pool.ids();
        let free: Vec<u64> = running
            .iter()
            .copied()
            .filter(|id| paused.is_none_or(|(p, _)| p != *id))
            .collect();
        if kills.due()
            && let Some(&id) = free.choose(&mut rng)
        {
            pool.replace(id, failures);
            faults.kills += 1;
        }
        if pauses.due()
            && paused.is_none()
            && let Some(&id) = free.choose(&mut rng)
        {
            pool.freeze(id, true);
            paused = Some((id, Instant::now() + pause_for));
            faults.pauses += 1;
        }
        if restarts.due() && restarting.is_none() {
            let broker = broker.clone();
            restarting = Some(tokio::task::spawn_blocking(move || {
                broker.lock().expect("not poisoned").restart()
            }));
            faults.restarts += 1;
        }
    }
    if let Some((id, _)) = paused {
        pool.freeze(id, false);
    }
    if let Some(restart) = restarting
        && let Ok(Err(e)) = restart.await
    {
        failures.push(format!("the broker restart failed: {e}"));
    }
    (faults, ledger)
}

/// Receives until the queue stays empty, acknowledging what it finds; returns how many.
/// Temporary errors (a connection the last broker restart broke) are retried for a while.
pub(crate) async fn drain_leftovers(driver: &dyn Driver) -> Result<u64, hermes_core::Error> {
    let retry_until = Instant::now() + Duration::from_secs(30);
    let mut found = 0;
    loop {
        match driver.receive(&[], Duration::from_secs(2)).await {
            Ok(Some(delivery)) => {
                found += 1;
                driver.ack(&delivery).await?;
            }
            Ok(None) => return Ok(found),
            Err(hermes_core::Error::Undecodable { .. }) => found += 1,
            Err(e) if e.is_temporary() && Instant::now() < retry_until => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e),
        }
    }
}
