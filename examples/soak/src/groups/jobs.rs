//! The jobs of a `groups` run and their handlers: each handler takes a few milliseconds, then
//! appends one [`Line`] to the run's log with a single `O_APPEND` write.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_core::tracking::Step;
use hermes_core::{BoxError, Dispatcher, Emitter, Job, JobContext};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde::{Deserialize, Serialize};

use super::ledger::{Kind, Line};
use crate::args::Sabotage;
use crate::handler::{Span, micros_now};

/// A job of batch `batch`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Member {
    /// The batch's number in the run.
    pub batch: u32,
    /// The job's number in its batch.
    pub n: u32,
}

impl Job for Member {
    const TYPE: &'static str = "hermes-soak.member";
}

/// The success callback of batch `batch`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatchDone {
    /// The batch's number in the run.
    pub batch: u32,
}

impl Job for BatchDone {
    const TYPE: &'static str = "hermes-soak.batch-done";
}

/// Step `step` of chain `chain`, taking `value` from the step before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// The chain's number in the run.
    pub chain: u32,
    /// The step's number, from 1.
    pub step: u32,
    /// What the step before returned (for the first step, the chain's seed).
    pub value: u64,
}

impl Job for Link {
    const TYPE: &'static str = "hermes-soak.link";
}

impl Step for Link {
    type Output = Link;
}

impl Link {
    /// The first step of chain `chain`.
    pub fn first(chain: u32) -> Link {
        Link {
            chain,
            step: 1,
            value: u64::from(chain) * 1_000 + 7,
        }
    }

    /// What this step's handler returns: the next step's job. A value that depends on every
    /// step before it, so a step that ran on another step's result shows in the log.
    pub fn next(&self) -> Link {
        Link {
            chain: self.chain,
            step: self.step + 1,
            value: self
                .value
                .wrapping_mul(31)
                .wrapping_add(u64::from(self.step)),
        }
    }

    /// Step `step` of chain `chain`, as the chain's steps compute it.
    pub fn expected(chain: u32, step: u32) -> Link {
        let mut link = Link::first(chain);
        while link.step < step {
            link = link.next();
        }
        link
    }
}

/// Where a worker's handlers log, and how they behave.
#[derive(Debug)]
pub struct GroupLog {
    log: File,
    worker: String,
    rng: Mutex<StdRng>,
    sabotage: Sabotage,
    members: AtomicU64,
}

impl GroupLog {
    /// Handlers appending to `log` as `worker`, their durations drawn from `seed`, with
    /// `sabotage`'s faults.
    ///
    /// # Errors
    /// When the log cannot be opened.
    pub fn new(log: &Path, worker: String, seed: u64, sabotage: Sabotage) -> io::Result<Self> {
        Ok(GroupLog {
            log: OpenOptions::new().create(true).append(true).open(log)?,
            worker,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            sabotage,
            members: AtomicU64::new(0),
        })
    }

    /// Takes 1 to `most_ms` milliseconds, then logs one run of `kind` for the job `(a, b)`
    /// with `value`, in the group `ctx` names.
    async fn run(
        &self,
        kind: Kind,
        (a, b): (u32, u32),
        value: u64,
        ctx: &JobContext,
        most_ms: u64,
    ) -> io::Result<()> {
        let start = micros_now();
        let millis = self
            .rng
            .lock()
            .expect("not poisoned")
            .random_range(1..=most_ms);
        tokio::time::sleep(Duration::from_millis(millis)).await;
        if kind == Kind::Member
            && let Some(n) = self.sabotage.sabotage_lose_every
            && (self.members.fetch_add(1, Ordering::SeqCst) + 1).is_multiple_of(n.max(1))
        {
            return Ok(());
        }
        let line = Line {
            kind,
            a,
            b,
            value,
            group: ctx.group().unwrap_or("-").to_owned(),
            worker: self.worker.clone(),
            span: Span {
                start,
                end: micros_now(),
            },
        }
        .to_string();
        // One short write to a file opened with O_APPEND: lines never interleave.
        let written = (&self.log).write(line.as_bytes())?;
        if written == line.len() {
            Ok(())
        } else {
            Err(io::Error::other("the log line was written in part"))
        }
    }
}

/// Registers the handlers of a `groups` run on `dispatcher`, logging to `log`; `emitter`
/// sends the copies `--sabotage-rerun-callbacks` asks for.
pub fn register(dispatcher: &mut Dispatcher, log: Arc<GroupLog>, emitter: Emitter) {
    let members = log.clone();
    dispatcher.register_job(move |job: Member, ctx: JobContext| {
        let log = members.clone();
        async move { log.run(Kind::Member, (job.batch, job.n), 0, &ctx, 5).await }
    });
    let callbacks = log.clone();
    dispatcher.register_job(move |job: BatchDone, ctx: JobContext| {
        let (log, emitter) = (callbacks.clone(), emitter.clone());
        async move {
            log.run(Kind::Callback, (job.batch, 0), 0, &ctx, 20).await?;
            if log.sabotage.sabotage_rerun_callbacks && ctx.group().is_some() {
                emitter.job(&job).send().await?;
            }
            Ok::<_, BoxError>(())
        }
    });
    dispatcher.register_step(move |link: Link, ctx: JobContext| {
        let log = log.clone();
        async move {
            log.run(Kind::Step, (link.chain, link.step), link.value, &ctx, 20)
                .await?;
            Ok::<_, io::Error>(link.next())
        }
    });
}
