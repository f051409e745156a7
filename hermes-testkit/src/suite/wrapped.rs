//! The facet scenarios through a wrapper written with `forward!`: what an application's own
//! wrapper (a counting or logging one) keeps of the driver it wraps.

use hermes_core::{Driver, Error, async_trait};

use super::{Harness, Outcome};
use crate::CountingDriver;

/// Runs another harness's driver inside a [`CountingDriver`], a wrapper written as an
/// application writes one: the facet scenarios then prove that it keeps every facet.
#[derive(Debug)]
pub struct WrappedHarness<H>(pub H);

super::harness::harness_around!(
    WrappedHarness,
    CountingDriver<H::Driver>,
    |_harness, _queue, driver| Ok(CountingDriver::new(driver))
);

/// The facets of `driver`, as the names of those it has.
pub fn facets_of(driver: &dyn Driver) -> Vec<&'static str> {
    [
        ("inspect", driver.inspect().is_some()),
        ("browse", driver.browse().is_some()),
        ("dead_letters", driver.dead_letters().is_some()),
        ("workers", driver.workers().is_some()),
        ("unique", driver.unique().is_some()),
        ("limits", driver.limits().is_some()),
        ("controls", driver.controls().is_some()),
        ("jobs", driver.jobs().is_some()),
        ("counters", driver.counters().is_some()),
    ]
    .into_iter()
    .filter_map(|(name, present)| present.then_some(name))
    .collect()
}

/// A driver wrapped with [`forward!`](hermes_core::driver::forward) has every facet the driver
/// itself has, and delivers through the wrapper.
pub async fn a_wrapper_keeps_every_facet<H: Harness>(h: &H, queue: &str) -> Outcome {
    let inner = super::support::open(h, queue).await;
    let own = facets_of(&inner);
    let wrapped = CountingDriver::new(inner);
    assert_eq!(
        facets_of(&wrapped),
        own,
        "the wrapper hides a facet of the {} driver",
        wrapped.name()
    );
    let message = hermes_core::Message::new("wrapped");
    super::support::send(&wrapped, &message, hermes_core::DEFAULT_PRIORITY).await;
    assert_eq!(wrapped.sent(), 1, "the send went through the wrapper");
    let delivery = wrapped
        .receive(&[], super::support::PATIENCE)
        .await
        .expect("receive")
        .expect("the message sent through the wrapper");
    assert_eq!(delivery.message().id(), message.id());
    super::support::ack(&wrapped, &delivery).await;
    Outcome::Passed
}

/// Generates, for the harness built by `$harness`, one `#[test]` per facet scenario (figures,
/// browsing, dead letters, live workers, unique emits, periodic jobs) run through a
/// [`CountingDriver`] around the harness's driver: an application's wrapper written with
/// `forward!` keeps every facet. A scenario whose facet the driver lacks is skipped, as in
/// [`conformance_suite!`](crate::conformance_suite); `a_wrapper_keeps_every_facet` in the main
/// suite checks that the wrapper has exactly the facets the driver has.
///
/// ```
/// mod wrapped {
///     hermes_testkit::wrapped_facet_suite!(hermes_testkit::MemoryHarness::new());
/// }
/// ```
#[macro_export]
macro_rules! wrapped_facet_suite {
    ($harness:expr) => {
        $crate::wrapped_facet_suite!(@tests $harness;
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
        );
    };
    (@tests $harness:expr; $($scenario:ident),* $(,)?) => {
        $crate::conformance_suite!(@tests $crate::suite::WrappedHarness($harness); $($scenario),*);
    };
}
