//! How long a failed message waits before it runs again, and how often it may.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;

/// When and how often a message whose handler failed is tried again.
///
/// The [`Dispatcher`](crate::Dispatcher) asks a failing handler for its policy
/// ([`Handler::retry_policy`](crate::Handler::retry_policy)). When the message's retry count is
/// below [`max_retries`](Self::max_retries), it sends a copy with `retries + 1`, due after
/// [`backoff`](Self::backoff).
///
/// ```
/// use std::time::Duration;
/// use hermes_core::RetryPolicy;
///
/// let policy = RetryPolicy::fixed(Duration::from_secs(5), 3);
/// assert_eq!(policy.max_retries(), 3);
/// assert_eq!(policy.backoff(0), Duration::from_secs(5));
///
/// let sidekiq = RetryPolicy::default();
/// assert_eq!(sidekiq.max_retries(), 25);
/// let first = sidekiq.backoff(0).as_secs();
/// assert!((16..=45).contains(&first));
/// ```
#[derive(Clone)]
pub struct RetryPolicy {
    max_retries: u32,
    backoff: Backoff,
}

#[derive(Clone)]
enum Backoff {
    Sidekiq,
    Fixed(Duration),
    Exponential { base: Duration, max: Duration },
    Custom(Arc<dyn Fn(u32) -> Duration + Send + Sync>),
}

impl RetryPolicy {
    /// Hermes' policy: up to `max_retries`, waiting `r⁴ + 15 + rand(1..=30)·(r+1)` seconds
    /// before retry `r + 1` (Sidekiq's formula).
    pub fn sidekiq(max_retries: u32) -> Self {
        RetryPolicy {
            max_retries,
            backoff: Backoff::Sidekiq,
        }
    }

    /// Up to `max_retries`, each after the same `delay`.
    pub fn fixed(delay: Duration, max_retries: u32) -> Self {
        RetryPolicy {
            max_retries,
            backoff: Backoff::Fixed(delay),
        }
    }

    /// Up to `max_retries`, waiting `base · 2^r` before retry `r + 1`, at most `max`.
    pub fn exponential(base: Duration, max: Duration, max_retries: u32) -> Self {
        RetryPolicy {
            max_retries,
            backoff: Backoff::Exponential { base, max },
        }
    }

    /// Up to `max_retries`, waiting `backoff(r)` before retry `r + 1`.
    pub fn custom(
        max_retries: u32,
        backoff: impl Fn(u32) -> Duration + Send + Sync + 'static,
    ) -> Self {
        RetryPolicy {
            max_retries,
            backoff: Backoff::Custom(Arc::new(backoff)),
        }
    }

    /// No retries at all.
    pub fn never() -> Self {
        RetryPolicy::fixed(Duration::ZERO, 0)
    }

    /// How many retries a message gets at most.
    pub fn max_retries(&self) -> u32 {
        self.max_retries
    }

    /// Whether a message already retried `retries` times gets another try.
    pub fn should_retry(&self, retries: u32) -> bool {
        retries < self.max_retries
    }

    /// How long a message already retried `retries` times waits before the next try.
    pub fn backoff(&self, retries: u32) -> Duration {
        match &self.backoff {
            Backoff::Sidekiq => {
                let r = u64::from(retries);
                let jitter: u64 = rand::rng().random_range(1..=30);
                let secs = r
                    .saturating_pow(4)
                    .saturating_add(15)
                    .saturating_add(jitter.saturating_mul(r + 1));
                Duration::from_secs(secs)
            }
            Backoff::Fixed(delay) => *delay,
            Backoff::Exponential { base, max } => {
                let factor = 2u32.checked_pow(retries).unwrap_or(u32::MAX);
                base.checked_mul(factor).map_or(*max, |d| d.min(*max))
            }
            Backoff::Custom(f) => f(retries),
        }
    }
}

impl Default for RetryPolicy {
    /// [`RetryPolicy::sidekiq`] with 25 retries, as Hermes.
    fn default() -> Self {
        RetryPolicy::sidekiq(25)
    }
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let backoff = match &self.backoff {
            Backoff::Sidekiq => "sidekiq".to_owned(),
            Backoff::Fixed(d) => format!("fixed {d:?}"),
            Backoff::Exponential { base, max } => format!("exponential {base:?}..{max:?}"),
            Backoff::Custom(_) => "custom".to_owned(),
        };
        f.debug_struct("RetryPolicy")
            .field("max_retries", &self.max_retries)
            .field("backoff", &backoff)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidekiq_backoff_stays_in_its_range() {
        let p = RetryPolicy::default();
        for r in [0u32, 1, 5, 24] {
            let r64 = u64::from(r);
            for _ in 0..50 {
                let secs = p.backoff(r).as_secs();
                let low = r64.pow(4) + 15 + (r64 + 1);
                let high = r64.pow(4) + 15 + 30 * (r64 + 1);
                assert!((low..=high).contains(&secs), "r={r} secs={secs}");
            }
        }
        assert!(p.should_retry(24));
        assert!(!p.should_retry(25));
    }

    #[test]
    fn exponential_doubles_up_to_its_cap() {
        let p = RetryPolicy::exponential(Duration::from_millis(100), Duration::from_secs(1), 9);
        assert_eq!(p.backoff(0), Duration::from_millis(100));
        assert_eq!(p.backoff(2), Duration::from_millis(400));
        assert_eq!(p.backoff(4), Duration::from_secs(1));
        assert_eq!(p.backoff(60), Duration::from_secs(1));
    }

    #[test]
    fn custom_and_never() {
        let p = RetryPolicy::custom(2, |r| Duration::from_secs(u64::from(r) * 10));
        assert_eq!(p.backoff(3), Duration::from_secs(30));
        assert!(!RetryPolicy::never().should_retry(0));
    }
}
