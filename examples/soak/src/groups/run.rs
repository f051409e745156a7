//! One `groups` run: emit the batches and chains, handle them while workers are killed, wait
//! until every callback and every chain's last step ran, then check the log and the backend.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_core::tracking::{Batch, CallbackState, Chain, WorkflowState};
use hermes_core::{Emitter, Error};
use rand::SeedableRng as _;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom as _;
use tokio::task::JoinHandle;

use super::jobs::{BatchDone, Link, Member};
use super::ledger::{Failures, GroupLedger, Kill, Plan};
use crate::args::{DriverKind, GroupsArgs, RunArgs};
use crate::broker::{Broker, delete_redis_keys};
use crate::handler::micros_now;
use crate::pool::Workers;
use crate::run::{Every, Outcome, PoolSettings, drain_leftovers, start_workers};

/// How many tasks emit at once.
const EMITTERS: usize = 4;

/// Runs the `groups` soak `args` describes.
///
/// # Errors
/// A setting that cannot be used, or a run that could not be set up.
pub async fn run(args: &GroupsArgs) -> Result<Outcome, String> {
    if args.workers == 0 || args.concurrency == 0 {
        return Err("--workers and --concurrency must be at least 1".to_owned());
    }
    let seed = args.seed.unwrap_or_else(rand::random);
    let tag = format!("groups{}x{:08x}", std::process::id(), seed as u32);
    let folder = std::env::temp_dir().join(format!("hermes-{tag}"));
    std::fs::create_dir_all(&folder).map_err(|e| format!("cannot create {folder:?}: {e}"))?;
    eprintln!(
        "hermes-soak groups: driver {}, seed {seed}, folder {}",
        args.driver.name(),
        folder.display()
    );
    let (mut broker, mut target) = Broker::prepare(&broker_args(args), &folder, &tag)?;
    if matches!(args.driver, DriverKind::Rabbitmq | DriverKind::Sqs) {
        target.store = Some(args.store.clone());
    }
    let log = folder.join("groups.log");
    let settings = PoolSettings {
        concurrency: args.concurrency,
        log: log.clone(),
        folder: folder.clone(),
        seed,
        sabotage: args.sabotage,
        limit: None,
        groups: true,
    };
    let (driver, mut pool) = start_workers(&target, &settings).await?;
    for _ in 0..args.workers {
        pool.spawn()?;
    }
    let started = Instant::now();
    let plan = Arc::new(Mutex::new(Plan {
        batch_size: args.batch_size,
        steps: args.steps,
        batches: vec![None; args.batches as usize],
        chains: vec![None; args.chains as usize],
    }));
    let emitter = Emitter::from_arc(driver.clone());
    let emitting = tokio::spawn(emit_all(emitter.clone(), plan.clone()));
    let mut failures = Vec::new();
    let (kills, mut ledger) = storm(
        args,
        seed,
        &mut *pool,
        &log,
        &plan,
        &emitting,
        &mut failures,
    )
    .await;
    match emitting.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => failures.push(format!("an emit failed: {e}")),
        Err(e) => failures.push(format!("the emitter panicked: {e}")),
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
    let plan = plan.lock().expect("not poisoned").clone();
    let verdict = ledger.verdict(&plan, &kills, args.visibility);
    failures.extend(verdict.failures.iter().cloned());
    failures.extend(check_backend(&emitter, &plan).await);
    match leftovers {
        Ok(0) => {}
        Ok(n) => failures.push(format!("{n} jobs were left on the queue")),
        Err(e) => failures.push(format!("the queue could not be checked for leftovers: {e}")),
    }
    let summary = format!(
        "batches {} of {}, callbacks {}, callbacks again after a kill {}, chains {} of {}, \
         chains finished {}, steps again after a kill {}, lost {}, job repeats {}, kills {}, \
         wall {:.1} s",
        plan.batches.len(),
        plan.batch_size,
        verdict.callbacks,
        verdict.callbacks_after_kill,
        plan.chains.len(),
        plan.steps,
        verdict.chains,
        verdict.steps_after_kill,
        verdict.lost,
        verdict.member_repeats,
        kills.len(),
        wall.as_secs_f64()
    );
    drop((driver, emitter));
    let kept = args.keep || !failures.is_empty();
    if kept {
        eprintln!(
            "hermes-soak: the queue {} is kept on the broker",
            target.queue
        );
    } else {
        broker.clean_up(&target).await;
        if let Some(store) = &target.store {
            delete_redis_keys(store, &target.store_key());
        }
        let _ = std::fs::remove_dir_all(&folder);
    }
    Ok(Outcome {
        summary,
        failures,
        folder: kept.then_some(folder),
    })
}

/// The settings [`Broker::prepare`] reads, from a `groups` run's: no restarts, no Sentinel.
fn broker_args(args: &GroupsArgs) -> RunArgs {
    RunArgs {
        driver: Some(args.driver),
        messages: Some(0),
        workers: args.workers,
        concurrency: args.concurrency,
        kill_every: args.kill_every,
        visibility: args.visibility,
        pause_every: None,
        broker_restart_every: None,
        sentinel: false,
        delayed_percent: 0,
        seed: args.seed,
        url: args.url.clone(),
        stall_timeout: args.stall_timeout,
        max_duplicates: None,
        limit: None,
        keep: args.keep,
        sabotage: args.sabotage,
    }
}

/// Kills a random worker every `--kill-every` (starting another) until every callback and
/// chain ran and nothing new was logged for longer than a claim lasts, or until nothing is
/// logged for the stall timeout. Returns the kills and the ledger as read so far.
async fn storm(
    args: &GroupsArgs,
    seed: u64,
    pool: &mut dyn Workers,
    log: &Path,
    plan: &Mutex<Plan>,
    emitting: &JoinHandle<Result<(), String>>,
    failures: &mut Vec<String>,
) -> (Vec<Kill>, GroupLedger) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut due = Every::new(Some(args.kill_every), &mut rng);
    let quiet = args.visibility + Duration::from_secs(1);
    let mut kills = Vec::new();
    let mut ledger = GroupLedger::new(log);
    let mut last_new = Instant::now();
    let mut done = false;
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
        if !done && emitting.is_finished() {
            done = ledger.is_done(&plan.lock().expect("not poisoned"));
            if done {
                eprintln!(
                    "hermes-soak groups: every callback and chain ran after {:.1} s ({} runs); \
                     waiting for stragglers",
                    started.elapsed().as_secs_f64(),
                    ledger.len()
                );
            }
        }
        if done && last_new.elapsed() >= quiet {
            break;
        }
        if last_new.elapsed() >= args.stall_timeout {
            failures.push(format!(
                "nothing ran for {:?}; {} runs logged",
                args.stall_timeout,
                ledger.len()
            ));
            break;
        }
        if !done
            && due.due()
            && let Some(&id) = pool.ids().choose(&mut rng)
        {
            if let Some(worker) = pool.name_of(id) {
                kills.push(Kill {
                    worker,
                    at: micros_now(),
                });
            }
            pool.replace(id, failures);
        }
    }
    (kills, ledger)
}

/// Emits the batches and chains of `plan`, alternating, from a few tasks at once, recording
/// each id as its emit returns.
async fn emit_all(emitter: Emitter, plan: Arc<Mutex<Plan>>) -> Result<(), String> {
    let (batches, chains) = {
        let plan = plan.lock().expect("not poisoned");
        (plan.batches.len(), plan.chains.len())
    };
    // 0, 1, 2, …: batch 0, chain 0, batch 1, chain 1, … then the rest of the longer list.
    let order: Vec<(bool, usize)> = (0..batches.max(chains))
        .flat_map(|i| [(true, i), (false, i)])
        .filter(|&(batch, i)| i < if batch { batches } else { chains })
        .collect();
    let order = Arc::new(Mutex::new(order.into_iter()));
    let tasks: Vec<_> = (0..EMITTERS)
        .map(|_| {
            let (emitter, plan, order) = (emitter.clone(), plan.clone(), order.clone());
            tokio::spawn(async move {
                loop {
                    let next = order.lock().expect("not poisoned").next();
                    let Some((is_batch, i)) = next else {
                        return Ok::<(), String>(());
                    };
                    let number = u32::try_from(i).expect("a batch or chain number fits in u32");
                    if is_batch {
                        let size = plan.lock().expect("not poisoned").batch_size;
                        let id = emit_batch(&emitter, number, size)
                            .await
                            .map_err(|e| format!("batch {i}: {e}"))?;
                        plan.lock().expect("not poisoned").batches[i] = Some(id);
                    } else {
                        let steps = plan.lock().expect("not poisoned").steps;
                        let id = emit_chain(&emitter, number, steps)
                            .await
                            .map_err(|e| format!("chain {i}: {e}"))?;
                        plan.lock().expect("not poisoned").chains[i] = Some(id);
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await
            .map_err(|e| format!("an emitter task panicked: {e}"))??;
    }
    Ok(())
}

async fn emit_batch(emitter: &Emitter, batch: u32, size: u32) -> Result<String, Error> {
    let members: Vec<Member> = (0..size).map(|n| Member { batch, n }).collect();
    let callback = Batch::new().on_success(&BatchDone { batch });
    emitter.emit_batch_of(callback, &members).await
}

async fn emit_chain(emitter: &Emitter, chain: u32, steps: u32) -> Result<String, Error> {
    let mut built = Chain::new(&Link::first(chain))?;
    for _ in 1..steps {
        built = built.then::<Link>()?;
    }
    emitter.emit_workflow(built.workflow()).await
}

/// What the backend says at the end: every batch succeeded whole with its callback done;
/// every chain succeeded, and its last step's result is what the steps compute.
async fn check_backend(emitter: &Emitter, plan: &Plan) -> Vec<String> {
    let mut failures = Failures::default();
    for (b, id) in plan.batches.iter().enumerate() {
        let Some(id) = id else { continue };
        match emitter.batch_status(id).await {
            Ok(Some(status))
                if status.succeeded == u64::from(plan.batch_size)
                    && status.pending == 0
                    && status.failed == 0
                    && status.on_success == CallbackState::Done => {}
            Ok(Some(status)) => failures.push(format!(
                "batch {b} ends with {} succeeded, {} failed, {} pending, its callback {:?}",
                status.succeeded, status.failed, status.pending, status.on_success
            )),
            Ok(None) => failures.push(format!("the backend does not know batch {b}")),
            Err(e) => failures.push(format!("the status of batch {b} cannot be read: {e}")),
        }
    }
    for (c, id) in plan.chains.iter().enumerate() {
        let Some(id) = id else { continue };
        let chain = u32::try_from(c).expect("a chain number fits in u32");
        match emitter.workflow_status(id).await {
            Ok(Some(status)) if status.state == WorkflowState::Succeeded => {}
            Ok(Some(status)) => {
                failures.push(format!("chain {c} ends {:?}", status.state));
            }
            Ok(None) => failures.push(format!("the backend does not know chain {c}")),
            Err(e) => failures.push(format!("the status of chain {c} cannot be read: {e}")),
        }
        let last = format!("{id}.{}", plan.steps);
        let expected = Link::expected(chain, plan.steps).next();
        match emitter.result::<Link>(&last).await {
            Ok(Some(result)) if result == expected => {}
            Ok(other) => {
                failures.push(format!("chain {c}'s result is {other:?}, not {expected:?}"))
            }
            Err(e) => failures.push(format!("the result of chain {c} cannot be read: {e}")),
        }
    }
    failures.into_vec()
}
