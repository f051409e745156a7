//! What a `groups` run's handlers logged, and the verdict on it: every job of every batch ran,
//! every callback ran once after its batch's last job, every chain ran each step once, in
//! order, on the result of the step before.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use super::jobs::Link;
use crate::handler::Span;
use crate::ledger::LogTail;

/// What a log line is a run of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A job of a batch.
    Member,
    /// A batch's success callback.
    Callback,
    /// A step of a chain.
    Step,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Member => "member",
            Kind::Callback => "callback",
            Kind::Step => "step",
        }
    }
}

/// One run of a handler, as logged: `<kind> <a> <b> <value> <group> <worker> <start> <end>`.
/// For a member, `a` is its batch and `b` its number; for a callback, `a` is its batch; for a
/// step, `a` is its chain and `b` its number, and `value` what it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// What ran.
    pub kind: Kind,
    /// The batch or chain.
    pub a: u32,
    /// The job or step within it.
    pub b: u32,
    /// The value a step was given.
    pub value: u64,
    /// The group the job ran in (`ctx.group()`), `-` for none.
    pub group: String,
    /// The worker that ran it.
    pub worker: String,
    /// When it ran.
    pub span: Span,
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} {} {} {} {} {} {} {}",
            self.kind.name(),
            self.a,
            self.b,
            self.value,
            self.group,
            self.worker,
            self.span.start,
            self.span.end
        )
    }
}

impl FromStr for Line {
    type Err = ();

    fn from_str(line: &str) -> Result<Self, ()> {
        let fields: Vec<&str> = line.trim_end().split(' ').collect();
        let [kind, a, b, value, group, worker, start, end] = fields.as_slice() else {
            return Err(());
        };
        let kind = match *kind {
            "member" => Kind::Member,
            "callback" => Kind::Callback,
            "step" => Kind::Step,
            _ => return Err(()),
        };
        let number = |s: &str| s.parse::<u64>().map_err(drop);
        Ok(Line {
            kind,
            a: a.parse().map_err(drop)?,
            b: b.parse().map_err(drop)?,
            value: number(value)?,
            group: (*group).to_owned(),
            worker: (*worker).to_owned(),
            span: Span {
                start: number(start)?,
                end: number(end)?,
            },
        })
    }
}

/// What a run sent: the ids of its batches and chains (`None` until the emit returns), and
/// their sizes.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Jobs per batch.
    pub batch_size: u32,
    /// Steps per chain.
    pub steps: u32,
    /// Each batch's id.
    pub batches: Vec<Option<String>>,
    /// Each chain's workflow id.
    pub chains: Vec<Option<String>>,
}

/// A worker the run killed, and when (microseconds since the Unix epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kill {
    /// The worker's name in the log.
    pub worker: String,
    /// When.
    pub at: u64,
}

/// The runs of one job, callback or step.
type Runs = Vec<(u64, String, String, Span)>;

/// The handlers' log of a `groups` run, read as it grows.
#[derive(Debug)]
pub struct GroupLedger {
    tail: LogTail,
    runs: HashMap<(Kind, u32, u32), Runs>,
    unreadable: Vec<String>,
}

/// The verdict on a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// What makes the run fail.
    pub failures: Vec<String>,
    /// Callbacks that ran.
    pub callbacks: u64,
    /// Callbacks that ran again because the worker of the run before was killed before it
    /// could record the run.
    pub callbacks_after_kill: u64,
    /// Chains whose every step ran.
    pub chains: u64,
    /// Steps that ran again for the same reason.
    pub steps_after_kill: u64,
    /// Jobs, callbacks and steps that never ran.
    pub lost: u64,
    /// Runs of batch jobs beyond their first (a batch job runs at least once).
    pub member_repeats: u64,
}

impl GroupLedger {
    /// The ledger of the log at `path` (which may not exist yet).
    pub fn new(path: &Path) -> Self {
        GroupLedger {
            tail: LogTail::new(path),
            runs: HashMap::new(),
            unreadable: Vec::new(),
        }
    }

    /// Reads what was appended since the last call; returns how many lines.
    ///
    /// # Errors
    /// When the log cannot be read.
    pub fn read_new(&mut self) -> io::Result<usize> {
        let lines = self.tail.read_lines()?;
        for text in &lines {
            match text.parse::<Line>() {
                Ok(line) => self
                    .runs
                    .entry((line.kind, line.a, line.b))
                    .or_default()
                    .push((line.value, line.group, line.worker, line.span)),
                Err(()) => self.unreadable.push(text.clone()),
            }
        }
        Ok(lines.len())
    }

    /// Whether every callback and every chain's last step of `plan` ran.
    pub fn is_done(&self, plan: &Plan) -> bool {
        let callbacks =
            plan.batches.iter().enumerate().all(|(b, id)| {
                id.is_some() && self.runs.contains_key(&(Kind::Callback, index(b), 0))
            });
        let chains = plan.chains.iter().enumerate().all(|(c, id)| {
            id.is_some() && self.runs.contains_key(&(Kind::Step, index(c), plan.steps))
        });
        callbacks && chains
    }

    /// How many runs were logged.
    pub fn len(&self) -> usize {
        self.runs.values().map(Vec::len).sum()
    }

    /// Whether nothing was logged.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The verdict against `plan`. A callback or step that ran twice is let pass only when the
    /// worker of each earlier run was killed within `grace` after that run ended: killed
    /// before it could record the run, so the job was delivered again.
    pub fn verdict(&self, plan: &Plan, kills: &[Kill], grace: Duration) -> Verdict {
        let mut verdict = Verdict::default();
        let mut failures = Failures::default();
        let grace = u64::try_from(grace.as_micros()).unwrap_or(u64::MAX);
        let killed_after = |worker: &str, end: u64| {
            kills
                .iter()
                .any(|k| k.worker == worker && k.at >= end && k.at - end <= grace)
        };
        for (b, id) in plan.batches.iter().enumerate() {
            let (b, id) = (index(b), id.as_deref().unwrap_or("?"));
            let mut last_end = 0;
            for n in 0..plan.batch_size {
                let Some(runs) = self.runs.get(&(Kind::Member, b, n)) else {
                    verdict.lost += 1;
                    failures.push(format!("job {n} of batch {b} never ran"));
                    continue;
                };
                verdict.member_repeats += runs.len() as u64 - 1;
                if runs.iter().any(|(_, group, _, _)| group != id) {
                    failures.push(format!("job {n} of batch {b} ran outside its batch"));
                }
                let first_end = runs.iter().map(|r| r.3.end).min().unwrap_or(0);
                last_end = last_end.max(first_end);
            }
            let what = format!("the callback of batch {b}");
            match self.runs.get(&(Kind::Callback, b, 0)) {
                None => {
                    verdict.lost += 1;
                    failures.push(format!("{what} never ran"));
                }
                Some(runs) => {
                    verdict.callbacks += 1;
                    verdict.callbacks_after_kill +=
                        check_once(&what, runs, &killed_after, &mut failures);
                    if runs.iter().any(|(_, group, _, _)| group != id) {
                        failures.push(format!("{what} ran without its batch's id"));
                    }
                    if first_start(runs) < last_end {
                        failures.push(format!("{what} started before its batch's last job"));
                    }
                }
            }
        }
        for (c, id) in plan.chains.iter().enumerate() {
            let (c, id) = (index(c), id.as_deref().unwrap_or("?"));
            let mut before_end = 0;
            let mut whole = true;
            for step in 1..=plan.steps {
                let what = format!("step {step} of chain {c}");
                let Some(runs) = self.runs.get(&(Kind::Step, c, step)) else {
                    verdict.lost += 1;
                    whole = false;
                    failures.push(format!("{what} never ran"));
                    continue;
                };
                verdict.steps_after_kill += check_once(&what, runs, &killed_after, &mut failures);
                let value = Link::expected(c, step).value;
                if runs
                    .iter()
                    .any(|(v, group, _, _)| *v != value || group != id)
                {
                    failures.push(format!("{what} ran on another value or outside its chain"));
                }
                if first_start(runs) < before_end {
                    failures.push(format!("{what} started before the step before it ended"));
                }
                before_end = runs.iter().map(|r| r.3.end).min().unwrap_or(0);
            }
            verdict.chains += u64::from(whole);
        }
        let known = self.runs.keys().filter(|(kind, a, b)| match kind {
            Kind::Member => (*a as usize) < plan.batches.len() && *b < plan.batch_size,
            Kind::Callback => (*a as usize) < plan.batches.len() && *b == 0,
            Kind::Step => (*a as usize) < plan.chains.len() && (1..=plan.steps).contains(b),
        });
        let strangers = self.runs.len() - known.count();
        if strangers > 0 {
            failures.push(format!("{strangers} jobs ran that the run never sent"));
        }
        if let Some(line) = self.unreadable.first() {
            failures.push(format!(
                "{} log lines cannot be read, the first: {line:?}",
                self.unreadable.len()
            ));
        }
        verdict.failures = failures.into_vec();
        verdict
    }
}

/// The failures of a verdict: the first few of each kind in full, then a count.
#[derive(Debug, Default)]
pub(crate) struct Failures {
    shown: Vec<String>,
    more: usize,
}

impl Failures {
    const SHOWN: usize = 10;

    pub(crate) fn push(&mut self, failure: String) {
        if self.shown.len() < Self::SHOWN {
            self.shown.push(failure);
        } else {
            self.more += 1;
        }
    }

    pub(crate) fn into_vec(mut self) -> Vec<String> {
        if self.more > 0 {
            self.shown.push(format!("and {} more", self.more));
        }
        self.shown
    }
}

/// Checks that the callback or step `what` ran once, apart from runs whose worker was killed
/// before it could record them; returns how many such runs there were.
fn check_once(
    what: &str,
    runs: &Runs,
    killed_after: &impl Fn(&str, u64) -> bool,
    failures: &mut Failures,
) -> u64 {
    let mut in_order: Vec<&(u64, String, String, Span)> = runs.iter().collect();
    in_order.sort_by_key(|r| r.3.start);
    let earlier = &in_order[..in_order.len() - 1];
    let unexplained = earlier
        .iter()
        .filter(|(_, _, worker, span)| !killed_after(worker, span.end))
        .count();
    if unexplained > 0 {
        failures.push(format!(
            "{what} ran {} times, {unexplained} of them on a worker that lived on",
            runs.len()
        ));
    }
    earlier.len() as u64
}

fn first_start(runs: &Runs) -> u64 {
    runs.iter().map(|r| r.3.start).min().unwrap_or(0)
}

fn index(i: usize) -> u32 {
    u32::try_from(i).expect("a batch or chain number fits in u32")
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn line(kind: Kind, a: u32, b: u32, value: u64, group: &str, worker: &str, ms: u64) -> String {
        Line {
            kind,
            a,
            b,
            value,
            group: group.to_owned(),
            worker: worker.to_owned(),
            span: Span {
                start: ms * 1000,
                end: (ms + 5) * 1000,
            },
        }
        .to_string()
    }

    fn plan() -> Plan {
        Plan {
            batch_size: 2,
            steps: 2,
            batches: vec![Some("b0".into())],
            chains: vec![Some("c0".into())],
        }
    }

    fn verdict_of(lines: &[String], kills: &[Kill]) -> Verdict {
        static RUNS: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "hermes-soak-groups-{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("groups.log");
        std::fs::write(&log, lines.concat()).unwrap();
        let mut ledger = GroupLedger::new(&log);
        ledger.read_new().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        ledger.verdict(&plan(), kills, Duration::from_secs(1))
    }

    fn clean() -> Vec<String> {
        let (one, two) = (Link::expected(0, 1).value, Link::expected(0, 2).value);
        vec![
            line(Kind::Member, 0, 0, 0, "b0", "w1", 0),
            line(Kind::Member, 0, 1, 0, "b0", "w2", 2),
            line(Kind::Callback, 0, 0, 0, "b0", "w1", 10),
            line(Kind::Step, 0, 1, one, "c0", "w2", 0),
            line(Kind::Step, 0, 2, two, "c0", "w1", 20),
        ]
    }

    #[test]
    fn lines_read_back_as_written() {
        let text = line(Kind::Step, 3, 4, 99, "g", "w", 7);
        let parsed: Line = text.parse().unwrap();
        assert_eq!(parsed.to_string(), text);
        assert!("step 1 2".parse::<Line>().is_err());
    }

    #[test]
    fn a_clean_log_passes() {
        let verdict = verdict_of(&clean(), &[]);
        assert_eq!(verdict.failures, Vec::<String>::new());
        assert_eq!((verdict.callbacks, verdict.chains, verdict.lost), (1, 1, 0));
    }

    #[test]
    fn a_second_callback_passes_only_after_its_worker_was_killed() {
        let mut lines = clean();
        lines.push(line(Kind::Callback, 0, 0, 0, "b0", "w3", 30));
        let verdict = verdict_of(&lines, &[]);
        assert_eq!(verdict.failures.len(), 1, "{:?}", verdict.failures);
        assert!(verdict.failures[0].contains("ran 2 times"));
        // w1 ended its run at 15 ms and was killed at 16 ms, before it could record it.
        let killed = [Kill {
            worker: "w1".into(),
            at: 16_000,
        }];
        let verdict = verdict_of(&lines, &killed);
        assert_eq!(verdict.failures, Vec::<String>::new());
        assert_eq!(verdict.callbacks_after_kill, 1);
        // Killed long after: it had time to record the run.
        let late = [Kill {
            worker: "w1".into(),
            at: 5_000_000,
        }];
        assert_eq!(verdict_of(&lines, &late).failures.len(), 1);
    }

    #[test]
    fn losses_order_and_values_fail() {
        let mut lost = clean();
        lost.remove(1);
        let verdict = verdict_of(&lost, &[]);
        assert_eq!(verdict.lost, 1);
        assert!(verdict.failures[0].contains("job 1 of batch 0 never ran"));

        let mut early = clean();
        early[2] = line(Kind::Callback, 0, 0, 0, "b0", "w1", 1);
        let failures = verdict_of(&early, &[]).failures;
        assert!(
            failures[0].contains("before its batch's last job"),
            "{failures:?}"
        );

        let mut wrong = clean();
        wrong[4] = line(Kind::Step, 0, 2, 1, "c0", "w1", 20);
        let failures = verdict_of(&wrong, &[]).failures;
        assert!(failures[0].contains("another value"), "{failures:?}");

        let mut stranger = clean();
        stranger.push(line(Kind::Member, 5, 0, 0, "b5", "w1", 0));
        stranger.push("nonsense\n".to_owned());
        let failures = verdict_of(&stranger, &[]).failures;
        assert_eq!(failures.len(), 2, "{failures:?}");
    }
}
