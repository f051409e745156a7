//! Printing benchmark figures beside the raw baseline measured in the same run.

use std::time::Duration;

/// Messages per second for `n` messages in `took`.
pub fn rate(n: usize, took: Duration) -> f64 {
    n as f64 / took.as_secs_f64()
}

/// Prints one figure: Hermes' rate and cost per message, the raw loop's rate, and their ratio.
pub fn print_ratio(what: &str, n: usize, ours: Duration, raw: Duration) {
    println!(
        "{what:<44} {:>9.0} msgs/s {:>8.2} µs/msg | raw {:>9.0} msgs/s | ratio {:.2}",
        rate(n, ours),
        ours.as_secs_f64() * 1e6 / n as f64,
        rate(n, raw),
        rate(n, ours) / rate(n, raw)
    );
}

/// User and system CPU time of this process so far (Linux, from `/proc/self/stat`, in clock
/// ticks of 10 ms); zero elsewhere.
pub fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}
