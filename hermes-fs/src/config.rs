//! Options of the filesystem driver.

use std::time::Duration;

use hermes_core::inspect::Retention;

/// Options of a [`FileSystemDriver`](crate::FileSystemDriver). Start from
/// [`FileSystemOptions::default`] and change fields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FileSystemOptions {
    /// How often an idle worker looks at the folders when it cannot be woken by change
    /// notifications, and how long it sleeps between polls then. Default 1 s, as in Hermes.
    pub refresh_interval: Duration,
    /// How long a claimed message may stay unfinished before it is delivered again; zero never
    /// delivers it again. Default 300 s, as in Hermes. Set it above your slowest handler, or
    /// let the dispatcher extend claims.
    pub visibility_timeout: Duration,
    /// Flush every new message file and its folder to disk before `send` returns, so a sent
    /// message survives a power loss. Default false (a crash of the process loses nothing
    /// either way; a power loss may lose the last messages without it).
    pub durable: bool,
    /// Wake idle workers through the operating system's change notifications (inotify), so a
    /// new message is handled within milliseconds; without it they poll every
    /// `refresh_interval`. Default true; falls back to polling when notifications are
    /// unavailable.
    pub watch: bool,
    /// How many dead letters `failed/` keeps per queue, and for how long; the oldest go first.
    /// Default 10,000 and 180 days.
    pub retention: Retention,
}

impl Default for FileSystemOptions {
    fn default() -> Self {
        FileSystemOptions {
            refresh_interval: Duration::from_secs(1),
            visibility_timeout: Duration::from_secs(300),
            durable: false,
            watch: true,
            retention: Retention::default(),
        }
    }
}
