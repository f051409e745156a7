//! The actions on jobs, one or a selection (`id` repeated): delete, run now, cancel, replay;
//! and pausing and resuming a queue or a type. Each is a POST carrying the page's token and
//! goes back to the page it came from.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State as Shared;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hermes_core::Priority;
use hermes_core::flow::{Cancellation, PauseTarget};
use hermes_core::inspect::{QueueState, Replay};

use crate::base::Base;
use crate::posted::{Posted, Refused};
use crate::state::State;

/// What every job action starts with: the checked form, its queue and its ids.
fn selection(state: &State, body: &[u8]) -> Result<(Posted, Priority, Vec<String>), Refused> {
    let posted = Posted::checked(state, body)?;
    let priority = posted.priority()?;
    let ids = posted.all("id");
    if ids.is_empty() {
        return Err(Refused(StatusCode::BAD_REQUEST, "no job selected"));
    }
    Ok((posted, priority, ids))
}

/// `POST jobs/delete`: removes each waiting, delayed or dead job selected.
pub(crate) async fn delete(Shared(state): Shared<Arc<State>>, base: Base, body: Bytes) -> Response {
    let (posted, priority, ids) = match selection(&state, &body) {
        Ok(selected) => selected,
        Err(refused) => return refused.into_response(),
    };
    let done = state
        .call(&base, async {
            let browse = state.browse()?;
            for id in &ids {
                browse.delete(priority, id).await?;
            }
            Ok(())
        })
        .await;
    match done {
        Ok(()) => posted.back(&base, "/queues"),
        Err(failed) => failed,
    }
}

/// `POST jobs/run-now`: each delayed job selected is queued again due now, under its id and
/// with its retries; a job no longer delayed is left as it is.
pub(crate) async fn run_now(
    Shared(state): Shared<Arc<State>>,
    base: Base,
    body: Bytes,
) -> Response {
    let (posted, priority, ids) = match selection(&state, &body) {
        Ok(selected) => selected,
        Err(refused) => return refused.into_response(),
    };
    let done = state
        .call(&base, async {
            let browse = state.browse()?;
            for id in &ids {
                let Some((QueueState::Delayed, message)) = browse.find(priority, id).await? else {
                    continue;
                };
                // Only the request that removed it queues it again, so two clicks queue one.
                if browse.delete(priority, id).await? {
                    state
                        .driver
                        .send(&message.replay_copy(true), priority)
                        .await?;
                }
            }
            Ok(())
        })
        .await;
    match done {
        Ok(()) => posted.back(&base, "/queues"),
        Err(failed) => failed,
    }
}

/// `POST jobs/cancel`: each job selected is cancelled: one waiting or delayed never runs, a
/// running one has its handler's cancellation token fired.
pub(crate) async fn cancel(Shared(state): Shared<Arc<State>>, base: Base, body: Bytes) -> Response {
    let (posted, _, ids) = match selection(&state, &body) {
        Ok(selected) => selected,
        Err(refused) => return refused.into_response(),
    };
    let done = state
        .call(&base, async {
            let controls = state.controls("cancelling jobs")?;
            for id in &ids {
                controls
                    .cancel(&Cancellation::new(id.clone(), "dashboard"))
                    .await?;
            }
            Ok(())
        })
        .await;
    match done {
        Ok(()) => posted.back(&base, "/queues"),
        Err(failed) => failed,
    }
}

/// `POST jobs/replay`: each dead job selected is queued again, its retries reset.
pub(crate) async fn replay(Shared(state): Shared<Arc<State>>, base: Base, body: Bytes) -> Response {
    let (posted, priority, ids) = match selection(&state, &body) {
        Ok(selected) => selected,
        Err(refused) => return refused.into_response(),
    };
    match state
        .call(&base, async {
            state
                .dead_letters()?
                .replay(priority, &Replay::ids(ids))
                .await
        })
        .await
    {
        Ok(_) => posted.back(&base, "/dead"),
        Err(failed) => failed,
    }
}

/// `POST pause` and `POST resume`: the `target` (`priority:<n>` or `type:<name>`).
async fn pause_or_resume(state: &State, base: &Base, body: &[u8], pause: bool) -> Response {
    let posted = match Posted::checked(state, body) {
        Ok(posted) => posted,
        Err(refused) => return refused.into_response(),
    };
    let target: PauseTarget = match posted.one("target").map(str::parse) {
        Some(Ok(target)) => target,
        _ => {
            return (
                StatusCode::BAD_REQUEST,
                "target: priority:<n> or type:<name>",
            )
                .into_response();
        }
    };
    let done = state
        .call(base, async {
            let controls = state.controls("pausing")?;
            if pause {
                controls.pause(&target).await
            } else {
                controls.resume(&target).await.map(|_| ())
            }
        })
        .await;
    match done {
        Ok(()) => posted.back(base, "/queues"),
        Err(failed) => failed,
    }
}

/// `POST pause`.
pub(crate) async fn pause(Shared(state): Shared<Arc<State>>, base: Base, body: Bytes) -> Response {
    pause_or_resume(&state, &base, &body, true).await
}

/// `POST resume`.
pub(crate) async fn resume(Shared(state): Shared<Arc<State>>, base: Base, body: Bytes) -> Response {
    pause_or_resume(&state, &base, &body, false).await
}
