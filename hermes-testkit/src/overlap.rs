//! How many runs overlapped: for checking a concurrency limit from the spans the handlers
//! recorded.

/// The most spans of `(start, end)`, in one clock, that overlap at any instant; a span that
/// ends when another starts does not overlap it.
///
/// ```
/// use hermes_testkit::most_at_once;
///
/// assert_eq!(most_at_once([(0, 10), (10, 20)]), 1);
/// assert_eq!(most_at_once([(0, 10), (5, 15), (10, 20), (12, 13)]), 3);
/// ```
pub fn most_at_once(spans: impl IntoIterator<Item = (u64, u64)>) -> usize {
    let mut edges: Vec<(u64, bool)> = spans
        .into_iter()
        .flat_map(|(start, end)| [(start, true), (end, false)])
        .collect();
    // At one instant, ends (`false`) sort before starts.
    edges.sort_unstable();
    let (mut running, mut most) = (0usize, 0usize);
    for (_, starts) in edges {
        if starts {
            running += 1;
            most = most.max(running);
        } else {
            running = running.saturating_sub(1);
        }
    }
    most
}
