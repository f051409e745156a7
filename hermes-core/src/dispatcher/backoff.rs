use std::time::Duration;

use tokio::time::Instant;

use super::DispatcherOptions;
use crate::Error;

/// Tracks a run of temporary driver errors: the next wait (doubling up to a cap) and whether the
/// run has lasted longer than allowed.
#[derive(Debug)]
pub(super) struct ErrorBackoff {
    first: Option<Instant>,
    next: Duration,
    timeout: Duration,
    cap: Duration,
}

const FIRST_WAIT: Duration = Duration::from_millis(100);

impl ErrorBackoff {
    pub(super) fn new(options: &DispatcherOptions) -> Self {
        ErrorBackoff {
            first: None,
            next: FIRST_WAIT,
            timeout: options.temporary_error_timeout,
            cap: options.max_error_backoff.max(Duration::from_millis(1)),
        }
    }

    /// Ends the run after a success.
    pub(super) fn reset(&mut self) {
        self.first = None;
        self.next = FIRST_WAIT;
    }

    /// The wait before retrying after `error`, or `None` when the error is permanent or the run
    /// of temporary errors has lasted too long.
    pub(super) fn retry_after(&mut self, error: &Error) -> Option<Duration> {
        if !error.is_temporary() {
            return None;
        }
        let first = *self.first.get_or_insert_with(Instant::now);
        if first.elapsed() >= self.timeout {
            return None;
        }
        let wait = self.next.min(self.cap);
        self.next = (self.next * 2).min(self.cap);
        Some(wait)
    }
}
