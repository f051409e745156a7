//! `hermes-soak groups`: batches with a success callback and chains of steps under the kill
//! storm.
//!
//! The run emits batches of jobs, each with a callback, and chains whose steps pass a value
//! along, while worker processes are SIGKILLed. Every handler appends one line to a log. At
//! the end the run checks the log (every job ran; every callback ran once, after its batch's
//! last job; every step ran once, in order, on the value the step before returned) and the
//! backend (every batch succeeded with its callback done; every chain succeeded with the
//! expected result), and prints one line:
//!
//! ```text
//! batches 200 of 50, callbacks 200, callbacks again after a kill 0, chains 200 of 5, chains finished 200, steps again after a kill 1, lost 0, job repeats 14, kills 12, wall 18.2 s
//! ```
//!
//! A callback or step runs again only when the worker that ran it was killed after it ended
//! and before it was recorded; the run fails for any other second run.

pub mod jobs;
pub mod ledger;
pub mod run;
