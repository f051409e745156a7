//! Unix time as `f64` seconds with microseconds, the form Hermes stores.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Now, as Unix seconds with microsecond precision (PHP's `microtime(true)`).
pub fn unix_now() -> f64 {
    to_unix(SystemTime::now())
}

/// `time` as Unix seconds with microsecond precision; times before 1970 are negative.
pub fn to_unix(time: SystemTime) -> f64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(d) => micros(d),
        Err(before) => -micros(before.duration()),
    }
}

/// Unix seconds back to a `SystemTime`. Values that are not finite map to the epoch.
pub fn from_unix(seconds: f64) -> SystemTime {
    if !seconds.is_finite() {
        return UNIX_EPOCH;
    }
    let d = Duration::try_from_secs_f64(seconds.abs()).unwrap_or(Duration::MAX);
    if seconds >= 0.0 {
        UNIX_EPOCH.checked_add(d).unwrap_or(UNIX_EPOCH)
    } else {
        UNIX_EPOCH.checked_sub(d).unwrap_or(UNIX_EPOCH)
    }
}

/// How long from now until Unix time `at`; zero when it has passed.
pub fn until(at: f64) -> Duration {
    from_unix(at)
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO)
}

fn micros(d: Duration) -> f64 {
    d.as_micros() as f64 / 1_000_000.0
}

/// Calls `attempt` until it yields something or `wait` has passed, sleeping `interval` (at most
/// what is left of `wait`) after each attempt that found nothing. For drivers that poll their
/// broker. Attempts at least once, also with a zero `wait`.
///
/// # Errors
/// The first error of `attempt`.
pub async fn poll<T, F, Fut>(
    wait: Duration,
    interval: Duration,
    mut attempt: F,
) -> Result<Option<T>, crate::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, crate::Error>>,
{
    let give_up = tokio::time::Instant::now() + wait;
    loop {
        if let Some(found) = attempt().await? {
            return Ok(Some(found));
        }
        let now = tokio::time::Instant::now();
        if now >= give_up {
            return Ok(None);
        }
        tokio::time::sleep(interval.min(give_up - now)).await;
    }
}
