//! The flow-control and tracking scenarios on a broker that keeps its limits, pauses,
//! cancellations, job records and groups on another backend ([`WithStore`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use hermes_core::driver::WithStore;
use hermes_core::{Driver, Error, async_trait};

use super::Harness;

/// Opens the store of the queue called by its argument.
pub type OpenStore = Arc<
    dyn Fn(String) -> Pin<Box<dyn Future<Output = Result<Arc<dyn Driver>, Error>> + Send>>
        + Send
        + Sync,
>;

/// Runs another harness's driver as a [`WithStore`], its limits and controls those of the
/// driver `open_store` opens for the same queue name (a Redis or PostgreSQL one, say).
pub struct StoreHarness<H>(pub H, pub OpenStore);

impl<H> StoreHarness<H> {
    /// `harness`'s drivers, with the stores `open_store` opens. Scenarios run their workers in
    /// processes of their own when `harness` allows it, so the store `open_store` opens must
    /// then be one another process reaches too (a server, not memory).
    pub fn new<F, Fut, D>(harness: H, open_store: F) -> Self
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<D, Error>> + Send + 'static,
        D: Driver,
    {
        let open_store = Arc::new(open_store);
        StoreHarness(
            harness,
            Arc::new(move |queue| {
                let open_store = open_store.clone();
                Box::pin(async move {
                    let store = open_store(queue).await?;
                    Ok(Arc::new(store) as Arc<dyn Driver>)
                })
            }),
        )
    }
}

impl<H: std::fmt::Debug> std::fmt::Debug for StoreHarness<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StoreHarness")
            .field(&self.0)
            .finish_non_exhaustive()
    }
}

super::harness::harness_around!(
    StoreHarness,
    WithStore<H::Driver>,
    |harness, queue, driver| {
        let store = (harness.1)(queue.to_owned()).await?;
        Ok(WithStore::from_arc(driver, store))
    }
);

/// Generates, for the harness built by `$harness` (a [`StoreHarness`]), one `#[test]` per
/// flow-control and tracking scenario: a broker whose workers keep their limits, pauses,
/// cancellations, results and groups on another backend passes them as that backend does.
///
/// ```
/// mod with_a_store {
///     hermes_testkit::store_suite!(hermes_testkit::suite::StoreHarness::new(
///         hermes_testkit::MemoryHarness::new(),
///         |_queue| async { Ok(hermes_testkit::MemoryDriver::new()) },
///     ));
/// }
/// ```
#[macro_export]
macro_rules! store_suite {
    ($harness:expr) => {
        $crate::conformance_suite!(@tests $harness;
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
}
