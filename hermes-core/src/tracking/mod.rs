//! What became of jobs, and jobs that wait for one another: results, status and progress by
//! id; batches with callbacks; chains and workflows.
//!
//! - A handler may return a value: a [`Job`] handler returns any serde type, kept
//!   with the job's [`JobRecord`] for the dispatcher's retention window and read by id
//!   ([`Emitter::result`](crate::Emitter::result), [`Emitter::wait_for`](crate::Emitter::wait_for)).
//!   The record also says where the job stands ([`JobState`]) and its
//!   [progress](crate::JobContext::progress).
//! - A [`Batch`] is jobs emitted as one group, with callbacks sent once when the last of them
//!   is done, even when workers are killed meanwhile.
//! - A [`Workflow`] is a graph of steps, each a job sent once the steps it waits for
//!   succeeded, with their results; a [`Chain`] is one step after another, typed so that a
//!   step that does not take the result of the one before does not compile.
//!
//! Their state lives in the backend ([`JobStore`](crate::driver::JobStore)), so it holds across
//! processes and survives worker crashes: a member of a group is counted once however often it
//! runs, and a callback or a step is queued once, atomically with marking it sent.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), hermes_core::Error> {
//! use hermes_core::tracking::{Batch, BatchStatus, ON_COMPLETE};
//! use hermes_core::{Dispatcher, Emitter, Job, JobContext};
//! use hermes_testkit::MemoryDriver;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct ImportRow {
//!     line: u32,
//! }
//! impl Job for ImportRow {
//!     const TYPE: &'static str = "import-row";
//! }
//!
//! #[derive(Serialize, Deserialize)]
//! struct MailReport {
//!     to: String,
//! }
//! impl Job for MailReport {
//!     const TYPE: &'static str = "mail-report";
//! }
//!
//! let driver = MemoryDriver::new();
//! let emitter = Emitter::new(driver.clone());
//! let rows: Vec<ImportRow> = (1..=3).map(|line| ImportRow { line }).collect();
//! let batch = Batch::new().on_complete(&MailReport { to: "ops@example.com".into() });
//! let id = emitter.emit_batch_of(batch, &rows).await?;
//!
//! let mut dispatcher = Dispatcher::new(driver).max_items(4);
//! // A handler's value is its job's result.
//! dispatcher.register_job(|row: ImportRow, _ctx| async move { Ok::<_, std::io::Error>(row.line * 10) });
//! dispatcher.register_job(|_: MailReport, _ctx: JobContext| async { Ok::<_, std::io::Error>(()) });
//! dispatcher.handle(&[]).await?;
//!
//! let status = emitter.batch_status(&id).await?.expect("kept");
//! assert_eq!((status.total, status.succeeded, status.pending), (3, 3, 0));
//! let callback = emitter.status(&BatchStatus::callback_id(&id, ON_COMPLETE)).await?;
//! assert!(callback.is_some_and(|record| record.state.is_final()));
//! # Ok(()) }
//! ```

mod batch;
mod group;
mod listing;
mod record;
mod workflow;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use batch::{Batch, BatchStatus, CallbackState};
pub use group::{GroupKind, GroupSpec, GroupState, Planned, Settled, StepSpec, Tally};
pub use listing::{
    GroupPage, GroupRequest, RecordPage, RecordRequest, after_listing_cursor, listing_cursor,
    parse_listing_cursor,
};
pub use record::{JobRecord, JobState, MAX_NOTE_LEN, Progress};
pub(crate) use workflow::NOT_RUN;
pub use workflow::{
    AnyStep, Chain, MAX_STEPS, StepRef, StepState, StepStatus, Workflow, WorkflowState,
    WorkflowStatus,
};

use crate::Job;

/// A job whose handler returns the job of the step after it: what a [`Chain`] and
/// [`Workflow::then`] need to check, when they are built, that one step's output is the next
/// step's input. Register its handler with
/// [`Dispatcher::register_step`](crate::Dispatcher::register_step), which holds it to
/// returning an `Output`.
pub trait Step: Job {
    /// What the handler returns: the next step's job, or the chain's result.
    type Output: Serialize + DeserializeOwned + Send + 'static;
}

/// The name of a batch's on-success callback ([`BatchStatus::callback_id`]).
pub const ON_SUCCESS: &str = "on-success";

/// The name of a batch's on-complete callback ([`BatchStatus::callback_id`]).
pub const ON_COMPLETE: &str = "on-complete";

/// The most bytes a result may take as JSON by default: 1 MiB
/// ([`DispatcherOptions::max_result_size`](crate::DispatcherOptions::max_result_size)).
pub const DEFAULT_MAX_RESULT_SIZE: usize = 1024 * 1024;

/// The longest group id, in bytes.
pub const MAX_GROUP_ID_LEN: usize = 128;

/// Checks a group id: 1 to [`MAX_GROUP_ID_LEN`] bytes of letters, digits, `-`, `_`, `.` and
/// `:` (a UUID, say), so it fits in key and file names on every backend.
///
/// # Errors
/// What is wrong with it.
pub fn check_group_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_GROUP_ID_LEN {
        return Err(format!(
            "a group id has 1 to {MAX_GROUP_ID_LEN} bytes, not {}",
            id.len()
        ));
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
    {
        return Err(format!(
            "group id {:?} may hold only letters, digits, '-', '_', '.' and ':'",
            crate::error::excerpt(id)
        ));
    }
    Ok(())
}

/// Checks a step name: 1 to 64 letters, digits, `-` and `_`.
fn check_step_name(name: &str) -> Result<(), String> {
    let fits = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
    if fits {
        Ok(())
    } else {
        Err(format!(
            "step name {:?} must have 1 to 64 letters, digits, '-' and '_'",
            crate::error::excerpt(name)
        ))
    }
}

/// The message id of the member `name` of `group`: a step, a callback, the opener.
pub(crate) fn member_id(group: &str, name: &str) -> String {
    format!("{group}.{name}")
}

/// The member that keeps a batch open until [`OpenBatch::close`].
pub(crate) fn opener_id(batch: &str) -> String {
    member_id(batch, "open")
}

/// Whether the message `id` is a callback of the batch `group`: a job of its own, not a member
/// to settle.
pub(crate) fn is_callback(group: &str, id: &str) -> bool {
    id.strip_prefix(group)
        .and_then(|rest| rest.strip_prefix('.'))
        .is_some_and(|name| name == ON_SUCCESS || name == ON_COMPLETE)
}

/// Whether the message `id` of `group` is one the group released (a callback, a step): a
/// delivery of it whose job is already done is not run again.
pub(crate) fn is_released(group: &str, id: &str) -> bool {
    id.strip_prefix(group)
        .is_some_and(|rest| rest.starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_group_ids_and_step_names_are_refused() {
        assert!(check_group_id("0f8e-aa:b.c_d").is_ok());
        for bad in ["", "a/b", "a b", "é", &"x".repeat(129)] {
            assert!(check_group_id(bad).is_err(), "{bad}");
        }
        assert!(check_step_name("parse-2").is_ok());
        for bad in ["", "a.b", "a:b", &"x".repeat(65)] {
            assert!(check_step_name(bad).is_err(), "{bad}");
        }
        assert!(is_released("g1", "g1.on-success"));
        assert!(!is_released("g1", "g10.x"));
        assert!(is_callback("g1", "g1.on-complete") && !is_callback("g1", "g1.top"));
    }
}
