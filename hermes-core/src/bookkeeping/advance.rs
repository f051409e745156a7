//! What a worker does once a member of a group is done for good: settle it, then release what
//! that made due (a batch's callbacks, a workflow's next steps) and settle finished groups in
//! the groups they belong to.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Map, Value};

use super::gather::Gatherer;
use crate::Error;
use crate::driver::JobStore;
use crate::tracking::{
    GroupKind, GroupState, JobRecord, NOT_RUN, ON_COMPLETE, ON_SUCCESS, Planned, Settled, StepSpec,
    is_released, member_id,
};

/// The deepest nesting of groups followed upward; a deeper chain of parents (or a loop in
/// stored data) stops there.
const MAX_NESTING: usize = 64;

/// Settles `member` of `group` as `outcome` (storing `record` with it), then advances the
/// group. Safe to run again after a crash: each step is idempotent.
pub(crate) async fn settle_member(
    store: &dyn JobStore,
    group: &str,
    member: &str,
    outcome: &Settled,
    record: Option<(&JobRecord, Duration)>,
) -> Result<(), Error> {
    settle_member_with(store, None, group, member, outcome, record).await
}

/// [`settle_member`], its settle gathered with others by `gatherer` when given.
pub(crate) async fn settle_member_with(
    store: &dyn JobStore,
    gatherer: Option<&Gatherer>,
    group: &str,
    member: &str,
    outcome: &Settled,
    record: Option<(&JobRecord, Duration)>,
) -> Result<(), Error> {
    let settled = match gatherer {
        Some(gatherer) => {
            gatherer
                .settle(store, group, member, outcome, record)
                .await?
        }
        None => store.settle(group, member, outcome, record).await?,
    };
    match settled {
        // A job of a batch (not a workflow's step) changes nothing while others are pending.
        Some((tally, _)) if tally.pending() > 0 && !is_released(group, member) => Ok(()),
        Some(_) => advance(store, group).await,
        None => {
            tracing::warn!("Job #{member} belongs to group {group}, which is gone (expired?)");
            match record {
                Some((record, keep)) => store.put(record, keep).await,
                None => Ok(()),
            }
        }
    }
}

/// Releases what the state of `group` makes due and, when it is finished, settles it in its
/// parent, and so on upward.
pub(crate) async fn advance(store: &dyn JobStore, group: &str) -> Result<(), Error> {
    let mut current = group.to_owned();
    for _ in 0..MAX_NESTING {
        let Some(mut state) = store.group(&current).await? else {
            return Ok(());
        };
        match &state.spec.kind {
            GroupKind::Batch {
                on_success,
                on_complete,
            } => {
                if state.tally.pending() > 0 {
                    return Ok(());
                }
                if let Some(planned) = on_complete {
                    release(store, &state, ON_COMPLETE, planned, None).await?;
                }
                if state.tally.failed == 0
                    && let Some(planned) = on_success
                {
                    release(store, &state, ON_SUCCESS, planned, None).await?;
                }
            }
            GroupKind::Workflow { steps } => {
                if advance_workflow(store, &state, steps).await? {
                    match store.group(&current).await? {
                        Some(now) => state = now,
                        None => return Ok(()),
                    }
                }
                if state.tally.pending() > 0 {
                    return Ok(());
                }
            }
        }
        let Some(parent) = state.spec.parent.clone() else {
            return Ok(());
        };
        let outcome = if state.tally.failed == 0 {
            Settled::Succeeded { result: None }
        } else {
            Settled::Failed {
                reason: format!(
                    "{} of its {} members failed",
                    state.tally.failed, state.tally.total
                ),
            }
        };
        if store
            .settle(&parent, &current, &outcome, None)
            .await?
            .is_none()
        {
            return Ok(());
        }
        current = parent;
    }
    tracing::warn!(
        "Group {group} is nested more than {MAX_NESTING} deep; its parents were not settled"
    );
    Ok(())
}

/// Releases the steps of a workflow whose steps before them all succeeded, and settles as
/// failed those after a failed step (they never run). Returns whether it settled any.
async fn advance_workflow(
    store: &dyn JobStore,
    state: &GroupState,
    steps: &[StepSpec],
) -> Result<bool, Error> {
    let workflow = &state.spec.id;
    let ids: Vec<String> = steps.iter().map(|s| member_id(workflow, &s.name)).collect();
    let outcomes = store.outcomes(workflow, &ids).await?;
    let mut settled: HashMap<&str, Settled> = steps
        .iter()
        .zip(outcomes)
        .filter_map(|(step, outcome)| Some((step.name.as_str(), outcome?)))
        .collect();
    let mut skipped = false;
    // Declared order is an order of the graph: a step comes after the steps it waits for.
    for (step, id) in steps.iter().zip(&ids) {
        if settled.contains_key(step.name.as_str()) || state.released.contains(&step.name) {
            continue;
        }
        let failed = step.after.iter().find(|before| {
            settled
                .get(before.as_str())
                .is_some_and(|outcome| !outcome.succeeded())
        });
        if let Some(before) = failed {
            let outcome = Settled::Failed {
                reason: format!("{NOT_RUN} {before} failed"),
            };
            store.settle(workflow, id, &outcome, None).await?;
            settled.insert(step.name.as_str(), outcome);
            skipped = true;
            continue;
        }
        let mut results = Map::new();
        for before in &step.after {
            match settled.get(before.as_str()) {
                Some(Settled::Succeeded { result }) => {
                    results.insert(before.clone(), result.clone().unwrap_or(Value::Null));
                }
                _ => break,
            }
        }
        if results.len() < step.after.len() {
            continue;
        }
        let input = match results.len() {
            0 => None,
            1 => results.into_iter().next().map(|(_, result)| result),
            _ => Some(Value::Object(results)),
        };
        if let Err(e) = release(store, state, &step.name, &step.planned, input).await {
            if !matches!(e, Error::InvalidResult(_)) {
                return Err(e);
            }
            let outcome = Settled::Failed {
                reason: e.to_string(),
            };
            store.settle(workflow, id, &outcome, None).await?;
            settled.insert(step.name.as_str(), outcome);
            skipped = true;
        }
    }
    Ok(skipped)
}

/// Queues the message `name` of `state`'s group once, with `input` as its payload when given.
async fn release(
    store: &dyn JobStore,
    state: &GroupState,
    name: &str,
    planned: &Planned,
    input: Option<Value>,
) -> Result<(), Error> {
    if state.released.iter().any(|n| n == name) {
        return Ok(());
    }
    let group = &state.spec.id;
    let message = planned.message(member_id(group, name), group, input)?;
    if store
        .release(group, name, &message, planned.priority)
        .await?
    {
        tracing::info!(
            "Group {group} released message #{} ({})",
            message.id(),
            message.message_type()
        );
    }
    Ok(())
}
