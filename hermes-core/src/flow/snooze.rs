//! Snoozing: a handler that was told to come back later says so.

use std::fmt;
use std::time::Duration;

/// Returned by a handler as its error to run the job again after a delay: the job is put back
/// for then, its `retries` unchanged, and nothing is logged or counted as a failure. For a
/// handler that learned it was throttled (an HTTP 429 with `Retry-After`).
///
/// The dispatcher finds it as the error itself or anywhere in its
/// [`source`](std::error::Error::source) chain, so an application's error type can wrap it.
///
/// ```
/// use std::time::Duration;
/// use hermes_core::JobContext;
/// use hermes_core::flow::Snooze;
///
/// async fn call_api(_ctx: JobContext) -> Result<(), Snooze> {
///     let retry_after = Some(Duration::from_secs(30)); // from the response's header
///     if let Some(delay) = retry_after {
///         return Err(Snooze::new(delay));
///     }
///     Ok(())
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snooze {
    delay: Duration,
}

/// The longest a snooze puts a job back for: one day. Longer delays are cut to it.
pub const MAX_SNOOZE: Duration = Duration::from_secs(24 * 3600);

impl Snooze {
    /// Run the job again after `delay` (at most [`MAX_SNOOZE`]).
    pub fn new(delay: Duration) -> Self {
        Snooze {
            delay: delay.min(MAX_SNOOZE),
        }
    }

    /// How long the job waits.
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// The snooze `error` is or wraps, if any.
    pub fn find(error: &(dyn std::error::Error + 'static)) -> Option<Snooze> {
        let mut next = Some(error);
        while let Some(error) = next {
            if let Some(snooze) = error.downcast_ref::<Snooze>() {
                return Some(*snooze);
            }
            next = error.source();
        }
        None
    }
}

impl fmt::Display for Snooze {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "snoozed for {:?}", self.delay)
    }
}

impl std::error::Error for Snooze {}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapper(Snooze);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("throttled")
        }
    }

    impl std::error::Error for Wrapper {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_snooze_is_found_itself_or_wrapped_and_capped() {
        let snooze = Snooze::new(Duration::from_secs(30));
        assert_eq!(Snooze::find(&snooze), Some(snooze));
        assert_eq!(Snooze::find(&Wrapper(snooze)), Some(snooze));
        assert_eq!(Snooze::find(&std::io::Error::other("x")), None);
        assert_eq!(Snooze::new(Duration::MAX).delay(), MAX_SNOOZE);
    }
}
