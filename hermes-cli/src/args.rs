//! The command line.

use std::time::{Duration, SystemTime};

use clap::{Parser, Subcommand};
use hermes_core::Priority;
use hermes_core::inspect::QueueState;

/// Look at and repair Hermes queues.
///
/// The queue is a URL: file:///var/hermes?queue=exports, redis://127.0.0.1:6379/0?key=hermes
/// (&client=fred; redis+cluster://host:port?hash_tag=T for a cluster;
/// redis+sentinel://host:26379,host:26379/<master> behind Sentinel),
/// amqp://guest:guest@127.0.0.1:5672/%2f?queue=hermes, or
/// sqs://hermes?endpoint=http://127.0.0.1:4566&region=us-east-1, or
/// postgres://app@127.0.0.1:5432/shop?queue=hermes&schema=hermes.
///
/// Sealed payloads show as sealed; with HERMES_SEAL_KEYS (id:base64,id:base64, the current key
/// first) they are opened, and emitted payloads are sealed.
#[derive(Debug, Parser)]
#[command(name = "hermes", version)]
pub(crate) struct Args {
    /// The queue, as a URL; overrides the configuration file's.
    #[arg(long, env = "HERMES_URL", hide_env_values = true)]
    pub(crate) url: Option<String>,
    /// A configuration file (TOML) with the url and the priority queues, as emitters and
    /// workers load it with hermes_core::QueueConfig.
    #[arg(long, env = "HERMES_CONFIG", value_name = "FILE")]
    pub(crate) config: Option<std::path::PathBuf>,
    /// A priority queue to know of besides the default one, as NAME=PRIORITY (repeatable;
    /// added to the configuration file's).
    #[arg(long = "priority", value_name = "NAME=N", value_parser = priority_queue)]
    pub(crate) priorities: Vec<(String, Priority)>,
    /// Where limits, pauses and cancellations live when the queue's backend keeps none
    /// (RabbitMQ, SQS): the URL of a Redis, PostgreSQL or directory backend, the same one the
    /// workers use.
    #[arg(
        long,
        env = "HERMES_STORE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub(crate) store: Option<String>,
    /// How long a command may take before it fails (for emit, each message).
    #[arg(long, default_value = "10s", value_parser = duration, env = "HERMES_TIMEOUT")]
    pub(crate) timeout: Duration,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Every queue's figures: waiting, delayed, in flight, dead, and the latency.
    Stats {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Print them again every SECS seconds, until interrupted.
        #[arg(long, value_name = "SECS", value_parser = duration)]
        watch: Option<Duration>,
    },
    /// Queue messages of TYPE.
    Emit {
        /// The message type.
        message_type: String,
        /// The payload, a JSON object or array.
        #[arg(long, conflicts_with = "payload_file")]
        payload: Option<String>,
        /// A file holding the payload.
        #[arg(long)]
        payload_file: Option<std::path::PathBuf>,
        /// The priority of the queue to send to.
        #[arg(long, default_value_t = hermes_core::DEFAULT_PRIORITY)]
        priority: Priority,
        /// Due after this long: 90s, 5m, 2h, 1500ms.
        #[arg(long, value_parser = duration, conflicts_with = "at")]
        delay: Option<Duration>,
        /// Due at this time, in RFC 3339: 2026-12-24T18:00:00+01:00.
        #[arg(long, value_parser = rfc3339)]
        at: Option<SystemTime>,
        /// How many copies to send, each with its own id.
        #[arg(long, default_value_t = 1)]
        count: u32,
    },
    /// List messages of a queue without taking them.
    Peek {
        /// Which messages.
        #[arg(long, default_value = "waiting", value_parser = state)]
        state: QueueState,
        /// The priority of the queue.
        #[arg(long, default_value_t = hermes_core::DEFAULT_PRIORITY)]
        priority: Priority,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// The dead letters: list, show, replay or purge them.
    Dead {
        #[command(subcommand)]
        command: DeadCommand,
        /// The priority of the queue.
        #[arg(long, default_value_t = hermes_core::DEFAULT_PRIORITY, global = true)]
        priority: Priority,
    },
    /// Remove every message of one state of a queue.
    Purge {
        /// Which messages.
        #[arg(long, value_parser = state)]
        state: QueueState,
        /// The priority of the queue.
        #[arg(long, default_value_t = hermes_core::DEFAULT_PRIORITY)]
        priority: Priority,
        /// Really remove them.
        #[arg(long)]
        yes: bool,
    },
    /// Ask the queue's workers to stop after their current message, as Hermes' shutdown does:
    /// through the RedisShutdown key on Redis, through a SharedFileShutdown file otherwise.
    Shutdown(#[command(flatten)] ShutdownArgs),
    /// Serve the dashboard: the queue's figures, dead letters (replay, delete) and workers,
    /// Prometheus text at /metrics and JSON at /api/stats. Stops on SIGINT or SIGTERM.
    Dashboard {
        /// The address to listen on. Off loopback, the dashboard asks every request for
        /// credentials, and starts only when the environment names them:
        /// HERMES_DASHBOARD_TOKEN, or HERMES_DASHBOARD_USER and HERMES_DASHBOARD_PASSWORD.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: std::net::SocketAddr,
        /// Serve no action: nothing can be replayed or deleted.
        #[arg(long)]
        read_only: bool,
    },
    /// Periodic jobs: the cron entries the running workers' schedulers announce.
    Cron {
        #[command(subcommand)]
        command: CronCommand,
    },
    /// Pause a queue (the default one, or --priority N) or a job type (--type T): within a
    /// second no worker starts a message of it; running ones finish. It stays paused across
    /// worker restarts until `hermes resume`.
    Pause(#[command(flatten)] PauseArgs),
    /// Resume what `hermes pause` paused.
    Resume(#[command(flatten)] PauseArgs),
    /// List what is paused.
    Paused {
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Cancel messages by id: a waiting or delayed one is never run (it is kept as a dead
    /// letter of kind cancelled), a running one has its handler's cancellation token fired
    /// within a second.
    Cancel {
        /// The message ids.
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
        /// Who asks, kept with the request (default: user@host).
        #[arg(long)]
        by: Option<String>,
    },
    /// Create or upgrade the backend's tables: the PostgreSQL schema, to the version this
    /// command knows. Safe to run from several places at once; the other backends need none.
    Migrate,
    /// What became of the job ID: its state, worker, error, progress and result, from the
    /// record its workers keep (a day by default).
    Job {
        /// The message id.
        id: String,
        /// Print the result in full.
        #[arg(long)]
        result: bool,
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// The batch ID: how many of its jobs are done, succeeded and failed, and its callbacks.
    Batch {
        /// The batch's id.
        id: String,
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// The workflow (or chain) ID: its state and each step's.
    Workflow {
        /// The workflow's id.
        id: String,
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// The running workers: where, since when, how busy, and what they handle now.
    Workers {
        #[command(subcommand)]
        command: Option<WorkersCommand>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// What `pause` and `resume` act on: the default queue unless told otherwise.
#[derive(Debug, clap::Args)]
#[group(multiple = false)]
pub(crate) struct PauseArgs {
    /// The queue of this priority.
    #[arg(long)]
    pub(crate) priority: Option<Priority>,
    /// This job type, on every queue.
    #[arg(long = "type", value_name = "TYPE")]
    pub(crate) message_type: Option<String>,
}

impl PauseArgs {
    /// The target named.
    pub(crate) fn target(&self) -> hermes_core::flow::PauseTarget {
        use hermes_core::flow::PauseTarget;
        match (&self.message_type, self.priority) {
            (Some(message_type), _) => PauseTarget::Type(message_type.clone()),
            (None, priority) => {
                PauseTarget::Priority(priority.unwrap_or(hermes_core::DEFAULT_PRIORITY))
            }
        }
    }
}

/// Where and when to signal the shutdown.
#[derive(Debug, clap::Args)]
pub(crate) struct ShutdownArgs {
    /// When, in RFC 3339 (default: now); workers stop once it has passed.
    #[arg(long, value_parser = rfc3339)]
    pub(crate) at: Option<SystemTime>,
    /// The file the workers watch (default for file:// URLs: DIRECTORY/shutdown; needed for
    /// RabbitMQ and SQS, which have no shared key).
    #[arg(long, value_name = "PATH")]
    pub(crate) file: Option<std::path::PathBuf>,
    /// The Redis key the workers watch.
    #[arg(long, default_value = "hermes_shutdown")]
    pub(crate) key: String,
}

/// What to do with the cron entries.
#[derive(Debug, Subcommand)]
pub(crate) enum CronCommand {
    /// List them with their next and previous ticks, and how many workers run each.
    Ls {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Emit an entry's message now, as its next tick would, under an id of its own
    /// (`cron-<name>-now-<unix ms>`); its schedule is left as it is.
    Run {
        /// The entry's name, as `hermes cron ls` lists it.
        name: String,
    },
}

/// What to do with the workers.
#[derive(Debug, Subcommand)]
pub(crate) enum WorkersCommand {
    /// Ask them to stop, as `hermes shutdown` does.
    Stop(#[command(flatten)] ShutdownArgs),
}

impl Command {
    /// The command's name, for messages.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Command::Stats { .. } => "stats",
            Command::Emit { .. } => "emit",
            Command::Peek { .. } => "peek",
            Command::Dead { .. } => "dead",
            Command::Purge { .. } => "purge",
            Command::Shutdown(_) => "shutdown",
            Command::Workers { .. } => "workers",
            Command::Cron { .. } => "cron",
            Command::Dashboard { .. } => "dashboard",
            Command::Migrate => "migrate",
            Command::Pause(_) => "pause",
            Command::Resume(_) => "resume",
            Command::Paused { .. } => "paused",
            Command::Cancel { .. } => "cancel",
            Command::Job { .. } => "job",
            Command::Batch { .. } => "batch",
            Command::Workflow { .. } => "workflow",
        }
    }
}

/// What to do with dead letters.
#[derive(Debug, Subcommand)]
pub(crate) enum DeadCommand {
    /// List them with their reasons.
    Ls {
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one, with its message.
    Show {
        /// Its id.
        id: String,
    },
    /// Put dead letters back on their queue, due now, retries reset.
    Replay {
        /// Their ids.
        ids: Vec<String>,
        /// All of them.
        #[arg(long, conflicts_with = "ids")]
        all: bool,
        /// Only those of this message type.
        #[arg(long = "type")]
        message_type: Option<String>,
        /// Keep their retry counts.
        #[arg(long)]
        keep_retries: bool,
    },
    /// Remove every dead letter of the queue.
    Purge {
        /// Really remove them.
        #[arg(long)]
        yes: bool,
    },
}

fn priority_queue(text: &str) -> Result<(String, Priority), String> {
    let (name, priority) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not NAME=PRIORITY"))?;
    let priority = priority
        .parse()
        .map_err(|_| format!("{priority:?} is not a whole number"))?;
    Ok((name.to_owned(), priority))
}

fn state(text: &str) -> Result<QueueState, String> {
    text.parse()
}

/// `90s`, `5m`, `2h`, `1500ms` or plain seconds.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 90s, 5m or 1500ms"))?;
    let seconds = match unit {
        "" | "s" => number,
        "ms" => number / 1000.0,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        "d" => number * 86400.0,
        _ => return Err(format!("{text:?}: the unit is ms, s, m, h or d")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("{text:?} is out of range"))
}

/// An RFC 3339 time: `2026-12-24T18:00:00Z`, `2026-12-24T18:00:00+01:00`.
pub(crate) fn rfc3339(text: &str) -> Result<SystemTime, String> {
    let time = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map_err(|_| {
            format!("{text:?} is not an RFC 3339 time such as 2026-12-24T18:00:00+01:00")
        })?;
    Ok(time.into())
}

/// `time` in RFC 3339, in UTC, to the second.
pub(crate) fn format_rfc3339(time: SystemTime) -> String {
    hermes_dashboard::view::rfc3339(time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_priority_queues_parse() {
        assert_eq!(duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("2"), Ok(Duration::from_secs(2)));
        assert!(duration("soon").is_err());
        assert!(duration("3 weeks").is_err());
        assert_eq!(priority_queue("high=200"), Ok(("high".to_owned(), 200)));
        assert!(priority_queue("high").is_err());
        let christmas = rfc3339("2026-12-24T18:00:00+01:00").unwrap();
        assert_eq!(hermes_core::time::to_unix(christmas), 1_798_131_600.0);
        assert!(rfc3339("tomorrow").is_err());
        assert_eq!(format_rfc3339(christmas), "2026-12-24T17:00:00Z");
    }
}
