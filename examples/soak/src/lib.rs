//! `hermes-soak`, a soak-and-kill harness for every Hermes driver.
//!
//! One run emits numbered, checksummed messages and runs worker processes that append each
//! handled message to a log with one `O_APPEND` write. Meanwhile it SIGKILLs a random worker
//! every so often (and starts a new one), optionally SIGSTOPs one for longer than the
//! visibility timeout, and optionally restarts the broker. When the queue has drained and the
//! claims have expired, it stops the workers, checks that nothing is left on the queue, and
//! prints one line:
//!
//! ```text
//! sent 2000, handled 2000 distinct, duplicates 3, lost 0, corrupt 0, kills 14, pauses 0, restarts 0, wall 21.4 s
//! ```
//!
//! ```sh
//! cargo run --release -p hermes-soak -- --driver fs --messages 2000 --workers 3 \
//!     --concurrency 4 --kill-every 1.5s --visibility 2s
//! ```
//!
//! It exits with 1 when a message whose emit returned Ok was lost or corrupted, when a worker
//! exited by itself, or when anything was left on the queue; with 2 on a setting it cannot use.

pub mod args;
pub mod broker;
pub mod emit;
pub mod groups;
pub mod handler;
pub mod ledger;
pub mod outage;
pub mod payload;
pub mod pool;
pub mod run;
pub mod sentinel;
pub mod target;
pub mod worker;
