//! Scenarios of the counters behind the dashboard's history, run on drivers with the facet.

use std::time::Duration;

use hermes_core::Driver;

use super::support::open;
use super::{Harness, Outcome};

/// The counters of `bucket` in `read`, by name.
fn counts_of(read: &[(String, Vec<(String, u64)>)], bucket: &str) -> Vec<(String, u64)> {
    let mut counts: Vec<(String, u64)> = read
        .iter()
        .filter(|(b, _)| b == bucket)
        .flat_map(|(_, c)| c.clone())
        .collect();
    counts.sort();
    counts
}

/// Two instances add to the same buckets, one of them from ten tasks at once: every count adds
/// up, in the bucket it went to and no other; a bucket never added to is left out of a read.
pub async fn counters_add_up_across_instances<H: Harness>(h: &H, queue: &str) -> Outcome {
    let first = open(h, queue).await;
    let Some(counters) = first.counters() else {
        return Outcome::lacks_facet("counters");
    };
    let second = open(h, queue).await;
    let other = second.counters().expect("the second instance's counters");
    let keep = Duration::from_secs(600);
    let pair = |name: &str, n: u64| (name.to_owned(), n);
    counters
        .add(
            "m100",
            &[pair("a\u{1f}handled", 2), pair("a\u{1f}d3", 1)],
            keep,
        )
        .await
        .expect("adding");
    other
        .add(
            "m100",
            &[pair("a\u{1f}handled", 3), pair("b\u{1f}failed", 1)],
            keep,
        )
        .await
        .expect("adding from the second instance");
    counters
        .add("h1", &[pair("a\u{1f}handled", 7)], keep)
        .await
        .expect("adding to another bucket");
    let adds = (0..10).map(|_| async {
        other
            .add("m100", &[pair("a\u{1f}retried", 1)], keep)
            .await
            .expect("adding at once");
    });
    futures_util::future::join_all(adds).await;

    let buckets = ["m99", "m100", "h1"].map(str::to_owned);
    let read = counters.read(&buckets).await.expect("reading");
    let read_again = other.read(&buckets).await.expect("reading from the second");
    assert_eq!(
        counts_of(&read, "m100"),
        [
            pair("a\u{1f}d3", 1),
            pair("a\u{1f}handled", 5),
            pair("a\u{1f}retried", 10),
            pair("b\u{1f}failed", 1),
        ],
        "every count adds up"
    );
    assert_eq!(counts_of(&read, "h1"), [pair("a\u{1f}handled", 7)]);
    assert!(
        read.iter().all(|(b, _)| b != "m99"),
        "a bucket never added to: {read:?}"
    );
    let order: Vec<&str> = read.iter().map(|(b, _)| b.as_str()).collect();
    assert_eq!(order, ["m100", "h1"], "in the order asked");
    assert_eq!(
        counts_of(&read_again, "m100"),
        counts_of(&read, "m100"),
        "both instances read the same"
    );
    Outcome::Passed
}
