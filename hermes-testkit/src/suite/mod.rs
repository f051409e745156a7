//! The conformance suite: scenarios every driver must pass, run against a real backend.
//!
//! A driver crate implements [`Harness`] for its driver and calls [`conformance_suite!`]
//! once in its `tests/`; that generates one named `#[test]` per scenario:
//!
//! ```
//! hermes_testkit::conformance_suite!(hermes_testkit::MemoryHarness::new());
//! ```
//!
//! Each test gets its own queue name, so tests run in parallel against one server. A scenario
//! that needs a capability the driver does not declare is skipped with a note on stderr. When
//! the harness reports its server unavailable, the test is skipped with the reason, or fails
//! when the environment variable `HERMES_TEST_STRICT=1` is set (as in CI).
//!
//! [`conformance_suite!`]: crate::conformance_suite

mod batches;
mod claims;
pub(crate) mod cron;
mod dead_letters;
mod delays;
mod delivery;
mod dispatcher;
mod flow;
mod harness;
mod history;
mod inspection;
mod jobs;
mod payloads;
mod priorities;
mod processes;
mod raw_fuzz;
mod serializers;
mod store;
mod support;
mod tracking;
mod unique;
mod workers;
mod wrapped;

/// Every scenario, by name: one `async fn(&harness, queue) -> Outcome` each, which
/// [`conformance_suite!`](crate::conformance_suite) runs. Each topic's file holds its scenarios:
/// delivery, priorities, delays, claims, payloads, batches, the dispatcher, jobs, random input,
/// inspection, dead letters, workers, unique emits, periodic jobs, wrappers, flow control.
pub mod scenarios {
    pub use super::batches::*;
    pub use super::claims::*;
    pub use super::cron::*;
    pub use super::dead_letters::*;
    pub use super::delays::*;
    pub use super::delivery::*;
    pub use super::dispatcher::*;
    pub use super::flow::*;
    pub use super::history::*;
    pub use super::inspection::*;
    pub use super::jobs::*;
    pub use super::payloads::*;
    pub use super::priorities::*;
    pub use super::raw_fuzz::*;
    pub use super::serializers::{
        input_the_serializer_refuses_is_quarantined, the_queue_holds_what_the_serializer_writes,
    };
    pub use super::support::{HIGH, LOW};
    pub use super::tracking::*;
    pub use super::unique::*;
    pub use super::workers::*;
    pub use super::wrapped::a_wrapper_keeps_every_facet;
}

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use harness::{DynHarness, Harness};
pub use serializers::SerializedHarness;
pub use store::{OpenStore, StoreHarness};
pub use wrapped::{WrappedHarness, facets_of};

/// How a scenario ended when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every check held.
    Passed,
    /// The driver does not declare what the scenario needs.
    Skipped(String),
}

impl Outcome {
    /// A skip because the driver lacks `capability`.
    pub fn lacks(capability: &str) -> Outcome {
        Outcome::Skipped(format!(
            "the driver does not declare the `{capability}` capability"
        ))
    }

    /// A skip because the driver has no `facet` (its accessor answers `None`).
    pub fn lacks_facet(facet: &str) -> Outcome {
        Outcome::Skipped(format!("the driver has no `{facet}` facet"))
    }
}

/// How long one scenario may take before it fails as hung.
pub const SCENARIO_TIMEOUT: Duration = Duration::from_secs(180);

/// Whether missing servers fail tests (`HERMES_TEST_STRICT=1`) instead of skipping them.
pub fn strict() -> bool {
    std::env::var("HERMES_TEST_STRICT").is_ok_and(|v| v == "1" || v == "true")
}

/// Whether the test `name` goes on, given whether its server is `available`: `true` when it
/// is; otherwise the test is skipped (`false`, with a line on standard error), or fails when
/// `strict` (`HERMES_TEST_STRICT=1` in CI).
///
/// # Panics
/// When the server is not available and `strict`.
pub fn available_or_skip(strict: bool, name: &str, available: Result<(), String>) -> bool {
    match available {
        Ok(()) => true,
        Err(reason) if strict => {
            panic!("{name}: the server is not available (HERMES_TEST_STRICT=1): {reason}")
        }
        Err(reason) => {
            eprintln!("{name}: skipped, the server is not available: {reason}");
            false
        }
    }
}

/// Runs `scenario` named `name` with the harness `make_harness` builds, on a fresh queue name,
/// in its own Tokio runtime; panics when it fails or hangs. The body of each generated test.
pub fn run<H, F, Fut>(make_harness: impl FnOnce() -> H, name: &str, scenario: F)
where
    H: Harness,
    F: FnOnce(Arc<H>, String) -> Fut,
    Fut: Future<Output = Outcome>,
{
    run_with_strictness(strict(), make_harness, name, scenario);
}

/// [`run`], with the strictness given instead of read from `HERMES_TEST_STRICT`: when `strict`,
/// an unavailable server fails the test.
pub fn run_with_strictness<H, F, Fut>(
    strict: bool,
    make_harness: impl FnOnce() -> H,
    name: &str,
    scenario: F,
) where
    H: Harness,
    F: FnOnce(Arc<H>, String) -> Fut,
    Fut: Future<Output = Outcome>,
{
    // The test's name (libtest names the thread of each test after it), for scenarios that
    // run their workers in copies of this test.
    let test = std::thread::current().name().map(str::to_owned);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    runtime.block_on(async {
        let harness = Arc::new(make_harness());
        if !available_or_skip(strict, name, harness.available().await) {
            return;
        }
        // A copy started by a scenario serves that scenario's queue, which the scenario cleans.
        let copy_of = processes::queue_of_this_copy();
        let queue = copy_of.clone().unwrap_or_else(|| unique_queue_name(name));
        let run = processes::within_test(test, scenario(harness.clone(), queue.clone()));
        let outcome = tokio::time::timeout(SCENARIO_TIMEOUT, run)
            .await
            .unwrap_or_else(|_| panic!("{name}: no result after {SCENARIO_TIMEOUT:?}"));
        if copy_of.is_none() {
            harness.cleanup(&queue).await;
        }
        if let Outcome::Skipped(reason) = outcome {
            eprintln!("{name}: skipped, {reason}");
        }
    });
}

/// A queue name for one test run: a short form of the scenario name and random hex, valid for
/// every driver (letters, digits and `-`, at most 60 bytes).
pub fn unique_queue_name(scenario: &str) -> String {
    let short: String = scenario
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    format!("t-{short}-{:08x}", rand::random::<u32>())
}

/// Generates one `#[test]` per conformance scenario for the harness built by `$harness`
/// (an expression evaluated once per test).
///
/// ```
/// mod conformance {
///     hermes_testkit::conformance_suite!(hermes_testkit::MemoryHarness::new());
/// }
/// ```
#[macro_export]
macro_rules! conformance_suite {
    ($harness:expr) => {
        $crate::conformance_suite!(@tests $harness;
            round_trip_keeps_every_field,
            php_json_in_hermes_json_out,
            unknown_priority_fails,
            highest_priority_first,
            priority_filter,
            fifo_within_priority,
            delayed_message_waits_until_due,
            delayed_message_keeps_priority,
            failing_handler_sends_one_delayed_copy,
            nack_redelivers,
            ack_removes_for_good,
            vanished_instance_message_redelivered,
            extend_keeps_claim,
            dispatcher_keeps_a_slow_handlers_claim,
            concurrent_consumers_each_message_once,
            undecodable_input_is_quarantined,
            the_queue_holds_what_the_serializer_writes,
            input_the_serializer_refuses_is_quarantined,
            empty_receive_returns_within_wait,
            large_payload_round_trip,
            oversized_payload_rejected,
            unicode_payload_round_trip,
            dropped_receive_loses_nothing,
            sent_by_one_received_by_another,
            dispatcher_handles_emitted_messages,
            send_batch_delivers_each,
            raw_body_due_later_waits,
            due_time_past_year_9999_refused,
            late_settle_leaves_the_redelivered_copy,
            busy_instance_does_not_run_others_twice,
            hostile_inputs_are_quarantined,
            random_raw_inputs_are_delivered_or_quarantined,
            typed_jobs_meet_php_messages,
            a_handler_past_its_time_limit_is_cancelled_and_retried,
            stats_count_every_state,
            peek_leaves_messages_where_they_were,
            pages_meet_every_message_once,
            counters_add_up_across_instances,
            purge_empties_only_what_it_names,
            failed_messages_become_dead_letters_and_replay,
            workers_are_listed_until_they_expire,
            concurrent_unique_emits_queue_one_message,
            a_unique_key_is_free_once_its_message_is_done,
            a_crashed_workers_unique_key_frees_after_its_window,
            three_schedulers_emit_one_message_per_tick,
            a_wrapper_keeps_every_facet,
            a_concurrency_limit_holds_across_workers,
            a_rate_holds_in_every_window,
            a_fast_rate_holds_in_every_window,
            starts_recorded_ahead_fill_a_rate_exactly,
            a_dead_holders_slot_frees_after_its_lease,
            a_snoozed_job_runs_again_with_its_retries,
            pausing_stops_new_starts_and_resuming_restarts_them,
            cancelling_stops_waiting_and_running_jobs,
            results_round_trip_with_their_type,
            kept_records_are_met_once_by_pages,
            kept_groups_are_met_once_by_pages,
            status_moves_through_its_states,
            a_batch_runs_its_success_callback_once_after_its_last_job,
            a_batch_with_a_dead_job_completes_without_success,
            a_second_copy_of_a_released_message_does_not_run,
            a_three_step_chain_passes_results_in_order,
            a_diamond_starts_its_last_step_once_with_both_results,
        );
    };
    (@tests $harness:expr; $($scenario:ident),* $(,)?) => {
        $(
            #[test]
            fn $scenario() {
                $crate::suite::run(
                    || $harness,
                    stringify!($scenario),
                    |harness, queue| async move {
                        $crate::suite::scenarios::$scenario(&*harness, &queue).await
                    },
                );
            }
        )*
    };
}

#[cfg(test)]
mod tests {
    /// The names in `conformance_suite!`'s list.
    fn listed(source: &str) -> Vec<String> {
        let start =
            source.find("(@tests $harness;").expect("the macro's list") + "(@tests $harness;".len();
        let end = start + source[start..].find(");").expect("the list's end");
        source[start..end]
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// The scenario functions a source file defines: `pub async fn <name><H: Harness>`.
    fn defined(source: &str) -> Vec<String> {
        source
            .lines()
            .filter_map(|line| line.strip_prefix("pub async fn "))
            .filter_map(|rest| rest.split_once("<H: Harness>"))
            .map(|(name, _)| name.to_owned())
            .collect()
    }

    #[test]
    fn the_suite_runs_every_scenario_there_is() {
        let listed = listed(include_str!("mod.rs"));
        // Every file of this folder: a scenario added to any of them must be listed.
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/suite");
        let defined: Vec<String> = std::fs::read_dir(&folder)
            .expect("the suite's folder")
            .map(|entry| entry.expect("an entry").path())
            .filter(|path| path.extension().is_some_and(|e| e == "rs"))
            .flat_map(|path| defined(&std::fs::read_to_string(path).expect("a source file")))
            .collect();
        assert!(defined.len() > 20, "found only {defined:?}");
        for name in &defined {
            assert!(
                listed.contains(name),
                "the scenario {name} is not in conformance_suite!'s list"
            );
        }
        for name in &listed {
            assert!(
                defined.contains(name),
                "{name} in the list is not a scenario"
            );
        }
    }

    #[test]
    fn the_serializer_suite_runs_scenarios_of_the_suite() {
        let all = listed(include_str!("mod.rs"));
        let serialized = listed(include_str!("serializers.rs"));
        assert!(serialized.len() >= 8, "{serialized:?}");
        for name in &serialized {
            assert!(
                all.contains(name),
                "{name} in serializer_suite! is not a scenario"
            );
        }
    }

    #[test]
    fn the_wrapped_suite_runs_scenarios_of_the_suite() {
        let all = listed(include_str!("mod.rs"));
        let wrapped = listed(include_str!("wrapped.rs"));
        assert!(wrapped.len() >= 8, "{wrapped:?}");
        for name in &wrapped {
            assert!(
                all.contains(name),
                "{name} in wrapped_facet_suite! is not a scenario"
            );
        }
    }
}
