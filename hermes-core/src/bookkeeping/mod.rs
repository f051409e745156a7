//! The worker's and the emitter's side of results, batches and workflows: recording a run,
//! settling a member of a group, and releasing what that makes due, through the driver's
//! [`JobStore`](crate::driver::JobStore). What they store is in [`tracking`](crate::tracking).

mod advance;
mod gather;
mod tracker;

pub(crate) use advance::{advance, settle_member, settle_member_with};
pub(crate) use gather::Gatherer;
pub(crate) use tracker::{Ended, RUNNING_AFTER, Tracker, settled_of};
