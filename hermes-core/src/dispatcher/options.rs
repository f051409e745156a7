use std::time::Duration;

/// How a [`Dispatcher`](super::Dispatcher) runs. Start from [`DispatcherOptions::default`] and
/// change fields, or use the dispatcher's builder methods.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DispatcherOptions {
    /// How many messages are handled at once. Default 1.
    pub concurrency: usize,
    /// Stop after this many messages were taken (0 = no limit, the default).
    pub max_items: u64,
    /// How long one `receive` waits for a message before the dispatcher checks its shutdown
    /// signals again. Default 1 s.
    pub poll_wait: Duration,
    /// On shutdown, how long running handlers may go on; those still running then are stopped
    /// and their messages given back unacknowledged. Default 30 s.
    pub grace_period: Duration,
    /// How long temporary driver errors (a lost connection) are retried before the dispatcher
    /// gives up and returns the error. Default 5 minutes.
    pub temporary_error_timeout: Duration,
    /// The longest wait between two retries of a temporary driver error. Default 5 s.
    pub max_error_backoff: Duration,
    /// Stop with an error when the driver reports an undecodable message, instead of logging
    /// it and going on. Default false.
    pub stop_on_undecodable: bool,
}

impl Default for DispatcherOptions {
    fn default() -> Self {
        DispatcherOptions {
            concurrency: 1,
            max_items: 0,
            poll_wait: Duration::from_secs(1),
            grace_period: Duration::from_secs(30),
            temporary_error_timeout: Duration::from_secs(300),
            max_error_backoff: Duration::from_secs(5),
            stop_on_undecodable: false,
        }
    }
}
