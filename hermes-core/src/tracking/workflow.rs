//! Workflows: steps declared in code, each sent once the steps it waits for succeeded, with
//! their results as its input. A chain is a workflow whose steps follow one another.

use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;

use serde::{Deserialize, Serialize};

use super::group::{GroupKind, GroupSpec, GroupState, Planned, Settled, StepSpec};
use super::{Step, check_step_name};
use crate::{Error, Job, Message, Priority};

/// The start of the reason of a step that never ran because one before it failed.
pub(crate) const NOT_RUN: &str = "not run: step";

/// The most steps a workflow may have.
pub const MAX_STEPS: usize = 1000;

/// A step of a [`Workflow`] whose job is `J`, to name it as the step another waits for.
#[derive(Debug)]
pub struct StepRef<J> {
    index: usize,
    job: PhantomData<fn() -> J>,
}

impl<J> Clone for StepRef<J> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<J> Copy for StepRef<J> {}

/// A graph of steps, declared in code: each step is a job, sent once every step it waits for
/// succeeded. A step after one other takes that step's result as its job; a step after
/// several takes a JSON object of their results by step name. A step that fails for good
/// stops the steps after it, and the workflow is then failed, naming that step.
///
/// A step can only wait for steps declared before it, so a workflow has no cycles; a step
/// named twice, or waiting for a step of another workflow, is refused when it is declared.
///
/// ```
/// use hermes_core::tracking::{Step, Workflow};
/// use hermes_core::Job;
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize)] struct Fetch { url: String }
/// # #[derive(Serialize, Deserialize)] struct Parse { body: String }
/// # #[derive(Serialize, Deserialize)] struct Thumbnail { body: String }
/// # #[derive(Serialize, Deserialize)] struct Publish { parse: u32, thumbnail: u32 }
/// # impl Job for Fetch { const TYPE: &'static str = "fetch"; }
/// # impl Job for Parse { const TYPE: &'static str = "parse"; }
/// # impl Job for Thumbnail { const TYPE: &'static str = "thumbnail"; }
/// # impl Job for Publish { const TYPE: &'static str = "publish"; }
/// // A fetch's result is the job of the steps after it.
/// impl Step for Fetch { type Output = Parse; }
///
/// let mut flow = Workflow::new();
/// let fetch = flow.start("fetch", &Fetch { url: "https://example.com".into() })?;
/// let parse = flow.then::<Parse, _>("parse", fetch)?;
/// let thumbnail = flow.after_all::<Thumbnail>("thumbnail", &[fetch.into()])?;
/// // Publish takes {"parse": <result>, "thumbnail": <result>}.
/// flow.after_all::<Publish>("publish", &[parse.into(), thumbnail.into()])?;
/// assert_eq!(flow.len(), 4);
/// # Ok::<(), hermes_core::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Workflow {
    pub(crate) id: String,
    steps: Vec<StepSpec>,
    description: Option<String>,
    pub(crate) parent: Option<String>,
}

/// A step of a workflow, whatever its job: what [`Workflow::after_all`] waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnyStep(usize);

impl<J> From<StepRef<J>> for AnyStep {
    fn from(step: StepRef<J>) -> Self {
        AnyStep(step.index)
    }
}

impl Default for Workflow {
    fn default() -> Self {
        Workflow::new()
    }
}

impl Workflow {
    /// A workflow with a fresh id and no steps.
    pub fn new() -> Self {
        Workflow {
            id: uuid::Uuid::new_v4().to_string(),
            steps: Vec::new(),
            description: None,
            parent: None,
        }
    }

    /// The workflow's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// How many steps it has.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether it has no steps.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// What the application calls it.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Makes the workflow a member of the batch `parent` (see [`Batch::within`](super::Batch::within)).
    pub fn within(mut self, parent: impl Into<String>) -> Self {
        self.parent = Some(parent.into());
        self
    }

    /// Adds the step `name` running `job` when the workflow starts.
    ///
    /// # Errors
    /// [`Error::Group`] for a name used already or not of 1 to 64 letters, digits, `-` and
    /// `_`; [`Error::InvalidMessage`] when the job does not serialize to an object or array.
    pub fn start<J: Job>(&mut self, name: &str, job: &J) -> Result<StepRef<J>, Error> {
        let message = Message::from_job(job)?;
        self.push(name, Planned::of(&message, J::PRIORITY), Vec::new())
    }

    /// Adds the step `name` after `before`: it runs the job `before`'s handler returned.
    /// The types must agree: `P`'s [`Step::Output`] is `J`.
    ///
    /// # Errors
    /// As [`start`](Self::start); [`Error::Group`] for a step of another workflow.
    pub fn then<J: Job, P: Step<Output = J>>(
        &mut self,
        name: &str,
        before: StepRef<P>,
    ) -> Result<StepRef<J>, Error> {
        self.after_all::<J>(name, &[before.into()])
    }

    /// Adds the step `name`, of job `J`, after every step of `before`: with one, its job is
    /// that step's result; with several, an object of their results by step name (checked
    /// when it is decoded: a result that does not fit fails the step, naming the path).
    ///
    /// # Errors
    /// As [`then`](Self::then); [`Error::Group`] when `before` is empty or names a step twice.
    pub fn after_all<J: Job>(
        &mut self,
        name: &str,
        before: &[AnyStep],
    ) -> Result<StepRef<J>, Error> {
        let planned = Planned {
            message_type: J::TYPE.to_owned(),
            payload: None,
            priority: J::PRIORITY,
            limit_key: None,
        };
        self.after_all_planned(name, planned, before)
    }

    /// Adds the step `name` sending a message of `message_type` on `priority` after every
    /// step of `before` (none: when the workflow starts, with `payload`), for a step whose
    /// type has no [`Job`] here.
    ///
    /// # Errors
    /// As [`after_all`](Self::after_all).
    pub fn step_of_type(
        &mut self,
        name: &str,
        message_type: &str,
        priority: Priority,
        payload: Option<serde_json::Value>,
        before: &[AnyStep],
    ) -> Result<AnyStep, Error> {
        let planned = Planned {
            message_type: message_type.to_owned(),
            payload,
            priority,
            limit_key: None,
        };
        let step: StepRef<()> = if before.is_empty() {
            self.push(name, planned, Vec::new())?
        } else {
            self.after_all_planned(name, planned, before)?
        };
        Ok(step.into())
    }

    fn after_all_planned<J>(
        &mut self,
        name: &str,
        planned: Planned,
        before: &[AnyStep],
    ) -> Result<StepRef<J>, Error> {
        if before.is_empty() {
            return Err(Error::Group(format!(
                "step {name} waits for no step: declare it with start"
            )));
        }
        let mut after = Vec::with_capacity(before.len());
        for step in before {
            let Some(spec) = self.steps.get(step.0) else {
                return Err(Error::Group(format!(
                    "step {name} waits for a step of another workflow"
                )));
            };
            if after.contains(&spec.name) {
                return Err(Error::Group(format!(
                    "step {name} waits for step {} twice",
                    spec.name
                )));
            }
            after.push(spec.name.clone());
        }
        self.push(name, planned, after)
    }

    fn push<J>(
        &mut self,
        name: &str,
        planned: Planned,
        after: Vec<String>,
    ) -> Result<StepRef<J>, Error> {
        check_step_name(name).map_err(Error::Group)?;
        if self.steps.iter().any(|s| s.name == name) {
            return Err(Error::Group(format!("step {name} is declared twice")));
        }
        if self.steps.len() >= MAX_STEPS {
            return Err(Error::Group(format!(
                "a workflow has at most {MAX_STEPS} steps"
            )));
        }
        self.steps.push(StepSpec {
            name: name.to_owned(),
            planned,
            after,
        });
        Ok(StepRef {
            index: self.steps.len() - 1,
            job: PhantomData,
        })
    }

    /// The spec to open.
    pub(crate) fn spec(&self) -> Result<GroupSpec, Error> {
        if self.steps.is_empty() {
            return Err(Error::Group("a workflow needs at least one step".into()));
        }
        if let Some(parent) = &self.parent {
            super::check_group_id(parent).map_err(Error::Group)?;
        }
        check_graph(&self.steps)?;
        Ok(GroupSpec {
            id: self.id.clone(),
            kind: GroupKind::Workflow {
                steps: self.steps.clone(),
            },
            parent: self.parent.clone(),
            description: self.description.clone(),
            created: crate::time::unix_now(),
        })
    }
}

/// Checks that every step waits only for steps declared before it: the graph has no cycle.
/// The builder ensures it; a spec read back is checked again.
pub(crate) fn check_graph(steps: &[StepSpec]) -> Result<(), Error> {
    let mut seen = HashSet::new();
    for step in steps {
        for before in &step.after {
            if !seen.contains(before.as_str()) {
                return Err(Error::Group(format!(
                    "step {} waits for {before}, which is not declared before it (a cycle, or \
                     no such step)",
                    step.name
                )));
            }
        }
        if !seen.insert(step.name.as_str()) {
            return Err(Error::Group(format!(
                "step {} is declared twice",
                step.name
            )));
        }
    }
    Ok(())
}

/// A chain of jobs: each step runs the job the step before it returned, so a step whose
/// output is not the next step's job does not compile. A step that fails for good stops the
/// chain. A chain is a [`Workflow`] whose steps are named `1`, `2`, `3`, …
///
/// ```
/// use hermes_core::tracking::{Chain, Step};
/// use hermes_core::Job;
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize)] struct Download { url: String }
/// # #[derive(Serialize, Deserialize)] struct Resize { path: String }
/// # #[derive(Serialize, Deserialize)] struct Upload { path: String }
/// # impl Job for Download { const TYPE: &'static str = "download"; }
/// # impl Job for Resize { const TYPE: &'static str = "resize"; }
/// # impl Job for Upload { const TYPE: &'static str = "upload"; }
/// impl Step for Download { type Output = Resize; }
/// impl Step for Resize { type Output = Upload; }
///
/// let chain = Chain::new(&Download { url: "https://example.com/a.png".into() })?
///     .then::<Resize>()?
///     .then::<Upload>()?;
/// assert_eq!(chain.workflow().len(), 3);
/// # Ok::<(), hermes_core::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Chain<Last> {
    workflow: Workflow,
    last: StepRef<Last>,
}

impl<First: Job> Chain<First> {
    /// A chain whose first step runs `job`.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] when the job does not serialize to an object or array.
    pub fn new(job: &First) -> Result<Self, Error> {
        let mut workflow = Workflow::new();
        let last = workflow.start("1", job)?;
        Ok(Chain { workflow, last })
    }
}

impl<Last: Step> Chain<Last> {
    /// The chain with one more step, running the job the last step returns.
    ///
    /// # Errors
    /// [`Error::Group`] past [`MAX_STEPS`] steps.
    pub fn then<Next: Job>(mut self) -> Result<Chain<Next>, Error>
    where
        Last: Step<Output = Next>,
    {
        let name = (self.workflow.len() + 1).to_string();
        let last = self.workflow.then::<Next, Last>(&name, self.last)?;
        Ok(Chain {
            workflow: self.workflow,
            last,
        })
    }
}

impl<Last> Chain<Last> {
    /// The workflow the chain is.
    pub fn workflow(&self) -> &Workflow {
        &self.workflow
    }

    /// The chain as a workflow, to emit ([`Emitter::emit_workflow`](crate::Emitter::emit_workflow)).
    pub fn into_workflow(self) -> Workflow {
        self.workflow
    }

    /// The name of its last step, whose result is the chain's.
    pub fn last_step(&self) -> String {
        self.workflow.len().to_string()
    }
}

/// Where a step of a workflow stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepState {
    /// Waiting for the steps before it.
    Pending,
    /// Sent: waiting in its queue or running.
    Sent,
    /// It succeeded.
    Succeeded,
    /// It failed for good.
    Failed {
        /// Why.
        reason: String,
    },
    /// It never runs: a step before it failed.
    Skipped {
        /// The failed step.
        after: String,
    },
}

/// One step of a workflow now.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StepStatus {
    /// Its name.
    pub name: String,
    /// Its message type.
    pub message_type: String,
    /// Its message id, to read its job's record and result.
    pub id: String,
    /// Where it stands.
    pub state: StepState,
}

/// Where a workflow stands as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkflowState {
    /// Some steps are not done.
    Running,
    /// Every step succeeded.
    Succeeded,
    /// The step named failed for good; the steps after it never run.
    Failed {
        /// The first step that failed, in declared order.
        step: String,
    },
}

/// A workflow now: its state and each step's.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WorkflowStatus {
    /// The workflow's id.
    pub id: String,
    /// What the application calls it.
    pub description: Option<String>,
    /// Where it stands.
    pub state: WorkflowState,
    /// Its steps, in declared order.
    pub steps: Vec<StepStatus>,
    /// When it was created, in Unix seconds.
    pub created: f64,
    /// When its last step was done, in Unix seconds.
    pub finished: Option<f64>,
}

impl WorkflowStatus {
    /// The status of the workflow in `state`, whose steps' outcomes are `outcomes` (in
    /// declared order); `None` when the group is not a workflow.
    pub(crate) fn from_state(state: &GroupState, outcomes: Vec<Option<Settled>>) -> Option<Self> {
        let GroupKind::Workflow { steps } = &state.spec.kind else {
            return None;
        };
        let mut failed: Option<String> = None;
        let outcomes: HashMap<&str, Option<Settled>> = steps
            .iter()
            .map(|s| s.name.as_str())
            .zip(outcomes)
            .collect();
        let steps: Vec<StepStatus> = steps
            .iter()
            .map(|step| {
                let state_of = match outcomes.get(step.name.as_str()).cloned().flatten() {
                    Some(Settled::Succeeded { .. }) => StepState::Succeeded,
                    Some(Settled::Failed { reason }) => match reason.strip_prefix(NOT_RUN) {
                        Some(rest) => StepState::Skipped {
                            after: rest.trim().trim_end_matches(" failed").to_owned(),
                        },
                        None => {
                            failed.get_or_insert_with(|| step.name.clone());
                            StepState::Failed { reason }
                        }
                    },
                    None if state.released.contains(&step.name) => StepState::Sent,
                    None => StepState::Pending,
                };
                StepStatus {
                    name: step.name.clone(),
                    message_type: step.planned.message_type.clone(),
                    id: super::member_id(&state.spec.id, &step.name),
                    state: state_of,
                }
            })
            .collect();
        let whole = match failed {
            Some(step) => WorkflowState::Failed { step },
            None if state.tally.pending() == 0 => WorkflowState::Succeeded,
            None => WorkflowState::Running,
        };
        Some(WorkflowStatus {
            id: state.spec.id.clone(),
            description: state.spec.description.clone(),
            state: whole,
            steps,
            created: state.spec.created,
            finished: state.finished,
        })
    }
}
