//! One worker of a dispatcher: receives a message, handles it, and goes on until told to stop.

use std::sync::atomic::Ordering;

use super::backoff::ErrorBackoff;
use super::controls::Receivable;
use super::process::{Context, Processed, process};
use crate::Error;
use crate::flow::CONTROLS_REFRESH;

/// Runs until a shutdown signal, the `max_items` limit, or a fatal driver error (recorded in
/// the context, which stops the other workers too).
pub(super) async fn run(ctx: &Context) {
    let mut errors = ErrorBackoff::new(&ctx.options);
    loop {
        let error = match step(ctx).await {
            Ok(Step::Continue) => {
                errors.reset();
                continue;
            }
            Ok(Step::Exit) => return,
            Err(error) => error,
        };
        if matches!(error, Error::Undecodable { .. }) {
            ctx.metrics.undecodable();
        }
        if matches!(error, Error::Undecodable { .. }) && !ctx.options.stop_on_undecodable {
            tracing::error!("Skipping undecodable message - {error}");
            continue;
        }
        let Some(wait) = errors.retry_after(&error) else {
            ctx.fail(error);
            return;
        };
        tracing::warn!("Driver error, retrying in {wait:?} - {error}");
        tokio::select! {
            () = tokio::time::sleep(wait) => {},
            () = ctx.stop.cancelled() => return,
        }
    }
}

enum Step {
    Continue,
    Exit,
}

async fn step(ctx: &Context) -> Result<Step, Error> {
    if ctx.stop.is_cancelled() {
        return Ok(Step::Exit);
    }
    for shutdown in &ctx.shutdowns {
        if shutdown.should_shutdown(ctx.started).await? {
            ctx.stop.cancel();
            return Ok(Step::Exit);
        }
    }
    let priorities = match ctx.controls.receivable(&ctx.priorities) {
        Receivable::Asked(asked) => std::borrow::Cow::Borrowed(asked),
        Receivable::Only(open) => std::borrow::Cow::Owned(open),
        Receivable::None => {
            // Every queue it takes from is paused: wait for a change.
            tokio::select! {
                () = ctx.controls.changed.notified() => {},
                () = tokio::time::sleep(CONTROLS_REFRESH) => {},
                () = ctx.stop.cancelled() => {},
            }
            return Ok(Step::Continue);
        }
    };
    let max = ctx.options.max_items;
    if max > 0 && ctx.taken.fetch_add(1, Ordering::SeqCst) >= max {
        ctx.taken.fetch_sub(1, Ordering::SeqCst);
        return Ok(Step::Exit);
    }
    let received = tokio::select! {
        received = ctx.driver.receive(&priorities, ctx.options.poll_wait) => received,
        () = ctx.stop.cancelled() => Ok(None),
    };
    match received {
        Ok(Some(delivery)) => {
            if process(ctx, delivery).await == Processed::Deferred && max > 0 {
                // Not run: it does not count against `max_items`.
                ctx.taken.fetch_sub(1, Ordering::SeqCst);
            }
            Ok(Step::Continue)
        }
        other => {
            if max > 0 {
                ctx.taken.fetch_sub(1, Ordering::SeqCst);
            }
            other.map(|_| Step::Continue)
        }
    }
}
