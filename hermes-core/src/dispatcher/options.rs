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
    /// How long any one handler may run on a message, for handlers without a limit of their
    /// own ([`Job::TIME_LIMIT`](crate::Job::TIME_LIMIT), [`Handler::time_limit`](crate::Handler::time_limit)).
    /// A handler still running at its limit has its context's cancellation token cancelled,
    /// its future dropped after [`time_limit_grace`](Self::time_limit_grace), and counts as
    /// failed: it is logged as `Handler <name> timed out after <limit>` and retried by its
    /// policy. Default `None`: no limit.
    pub time_limit: Option<Duration>,
    /// How long a handler past its time limit may go on after its token fired, to stop at a
    /// safe point, before its future is dropped. Default 1 s.
    pub time_limit_grace: Duration,
    /// Keep a message whose handler failed for good (no retry left, no retry policy, or a
    /// payload that does not fit its job type) in the driver's dead letters, with the reason,
    /// on drivers with the [`dead_letters`](crate::Driver::dead_letters) facet.
    /// Default true; false drops it, as Hermes does.
    pub keep_dead_letters: bool,
    /// How long the worker's announcement in the backend holds: it is renewed every third of
    /// this while the dispatcher runs, removed when it stops, and expires this long after a
    /// crash. On drivers with the [`workers`](crate::Driver::workers) facet; `None`
    /// announces nothing. Default 30 s.
    pub announce_ttl: Option<Duration>,
    /// How long a run holds a slot of a [concurrency limit](crate::flow::Limits) when the
    /// driver's claims have no lease: the slot is renewed every half of it while the run goes
    /// on, and frees itself this long after a worker died. On drivers whose claims have a
    /// lease (the visibility timeout), slots have that lease instead (within 1 s and a day).
    /// From 1 s to a day; [`handle`](super::Dispatcher::handle) refuses other values.
    /// Default 30 s.
    pub limit_lease: Duration,
    /// How long the record of a job ([`JobRecord`](crate::tracking::JobRecord): its state,
    /// result and progress) is kept after its last change, on drivers with the
    /// [`jobs`](crate::Driver::jobs) facet; `None` keeps no records (batches and workflows
    /// still work, but results are not kept and a job's state cannot be read by id). Default a
    /// day.
    pub keep_outcomes: Option<Duration>,
    /// The most bytes a handler's result may take as JSON: a larger one fails the run for
    /// good, with the sizes as its reason. Default
    /// [`DEFAULT_MAX_RESULT_SIZE`](crate::tracking::DEFAULT_MAX_RESULT_SIZE) (1 MiB).
    pub max_result_size: usize,
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
            time_limit: None,
            time_limit_grace: Duration::from_secs(1),
            keep_dead_letters: true,
            announce_ttl: Some(Duration::from_secs(30)),
            limit_lease: Duration::from_secs(30),
            keep_outcomes: Some(Duration::from_secs(24 * 3600)),
            max_result_size: crate::tracking::DEFAULT_MAX_RESULT_SIZE,
        }
    }
}
