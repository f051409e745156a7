//! The command line: a run's settings, and the hidden `worker` role the run starts itself in.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `hermes-soak`: emits numbered, checksummed messages, runs worker processes, kills, pauses
/// and restarts them (and the broker), then counts what was lost, duplicated or corrupted.
///
/// Exits with 1 when a message whose emit returned Ok was lost or corrupted, when a worker
/// exited by itself, or when anything was left on the queue; with 2 on a setting it cannot use.
#[derive(Debug, Parser)]
#[command(
    name = "hermes-soak",
    version,
    subcommand_negates_reqs = true,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// The role of a process the run started.
    #[command(subcommand)]
    pub role: Option<Role>,
    /// The run's settings.
    #[command(flatten)]
    pub run: RunArgs,
}

/// Processes the run starts of itself.
#[derive(Debug, Subcommand)]
pub enum Role {
    /// One worker process of a run.
    #[command(hide = true)]
    Worker(WorkerArgs),
    /// Stops the broker under a worker and an emitter: measures how long a failed emit takes,
    /// how soon the worker handles again after a short outage, and checks that it exits with
    /// an error after a long one.
    Outage(OutageArgs),
    /// Runs batches with a success callback and chains of steps under the kill storm, and
    /// checks that every callback ran once and after its batch's last job, that every chain
    /// ran its steps once each, in order, with the results passed along, and that nothing
    /// was lost.
    Groups(GroupsArgs),
}

/// The settings of a `groups` run.
#[derive(Debug, Clone, Args)]
pub struct GroupsArgs {
    /// The backend; RabbitMQ and SQS keep the groups' state in a Redis store (`--store`).
    #[arg(long, value_enum)]
    pub driver: DriverKind,
    /// How many batches to emit.
    #[arg(long, default_value_t = 200)]
    pub batches: u32,
    /// How many jobs each batch holds.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch_size: u32,
    /// How many chains to emit.
    #[arg(long, default_value_t = 200)]
    pub chains: u32,
    /// How many steps each chain has.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub steps: u32,
    /// How many worker processes run at once.
    #[arg(long, default_value_t = 3)]
    pub workers: usize,
    /// How many jobs each worker handles at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// SIGKILL a random worker this often (and start a new one); `0` never.
    #[arg(long, value_parser = parse_duration, default_value = "1.5s")]
    pub kill_every: Duration,
    /// The visibility timeout: how long a claim lasts before the job is delivered again.
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    pub visibility: Duration,
    /// The seed of the handlers' durations and the kill schedule (random by default; printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// The broker, as for a run of checked messages.
    #[arg(long)]
    pub url: Option<String>,
    /// RabbitMQ and SQS: the Redis URL of the store holding records and groups.
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    pub store: String,
    /// Give up after this long without a newly handled job.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub stall_timeout: Duration,
    /// Keep the run's folder (log, worker output, queue files) instead of removing it.
    #[arg(long)]
    pub keep: bool,
    /// Faults put in on purpose, to show the run catches them.
    #[command(flatten)]
    pub sabotage: Sabotage,
}

/// The settings of an outage run.
#[derive(Debug, Clone, Args)]
pub struct OutageArgs {
    /// The backend: `redis` and `redis-fred` on a Redis server the run starts, `sqs` on a
    /// test server (moto) the run starts, `rabbitmq` on the local RabbitMQ (`rabbitmqctl`).
    #[arg(long, value_enum)]
    pub driver: DriverKind,
    /// How long the short outage lasts.
    #[arg(long, value_parser = parse_duration, default_value = "3s")]
    pub down_for: Duration,
    /// The worker's temporary-error timeout; the long outage outlasts it.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub error_timeout: Duration,
}

/// The backends a run can soak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DriverKind {
    /// The filesystem driver, in a folder of the run's own.
    Fs,
    /// The Redis driver on the `redis` crate.
    Redis,
    /// The Redis driver on `fred`.
    RedisFred,
    /// The RabbitMQ driver.
    Rabbitmq,
    /// The SQS driver.
    Sqs,
    /// The PostgreSQL driver.
    Postgres,
    /// The in-memory driver; its workers are threads of this process.
    Memory,
}

impl DriverKind {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            DriverKind::Fs => "fs",
            DriverKind::Redis => "redis",
            DriverKind::RedisFred => "redis-fred",
            DriverKind::Rabbitmq => "rabbitmq",
            DriverKind::Sqs => "sqs",
            DriverKind::Postgres => "postgres",
            DriverKind::Memory => "memory",
        }
    }

    /// Whether this is one of the Redis drivers.
    pub fn is_redis(self) -> bool {
        matches!(self, DriverKind::Redis | DriverKind::RedisFred)
    }
}

/// A run's settings.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The backend to soak.
    #[arg(long, value_enum, required = true)]
    pub driver: Option<DriverKind>,
    /// How many messages to emit.
    #[arg(long, required = true)]
    pub messages: Option<u64>,
    /// How many worker processes run at once.
    #[arg(long, default_value_t = 3)]
    pub workers: usize,
    /// How many messages each worker handles at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// SIGKILL a random worker this often (and start a new one); `0` never.
    #[arg(long, value_parser = parse_duration, default_value = "1.5s")]
    pub kill_every: Duration,
    /// The visibility timeout: how long a claim lasts before the message is delivered again.
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    pub visibility: Duration,
    /// SIGSTOP a random worker this often, for longer than the visibility timeout, then
    /// SIGCONT it.
    #[arg(long, value_parser = parse_duration)]
    pub pause_every: Option<Duration>,
    /// Restart the broker this often: RabbitMQ with `rabbitmqctl stop_app` / `start_app`, Redis
    /// only on the server the run starts itself (with AOF and `appendfsync always`), or fail
    /// over with `--sentinel`.
    #[arg(long, value_parser = parse_duration)]
    pub broker_restart_every: Option<Duration>,
    /// Redis only: run on a master, a replica and three sentinels the run starts itself, with
    /// the replica wait on (`redis+sentinel://…?replica_wait=1`); a broker restart is then a
    /// failover: the master is SIGKILLed, the sentinels promote the replica, and an empty
    /// server takes the old master's place as a replica.
    #[arg(long)]
    pub sentinel: bool,
    /// The share of messages, in percent, emitted with a delay of up to 2 s (on RabbitMQ they
    /// pass through the delay ladder's queues). Default 10.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub delayed_percent: u32,
    /// The seed of the message mix and the fault schedule (random by default; printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// The broker: a Redis URL (default: a server the run starts on a free port), an AMQP URL
    /// (default `amqp://guest:guest@127.0.0.1:5672/%2f`) or an SQS endpoint (default
    /// `http://127.0.0.1:4566`). Unused by the filesystem and memory drivers.
    #[arg(long)]
    pub url: Option<String>,
    /// Give up waiting for the queue to drain after this long without a newly handled message.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub stall_timeout: Duration,
    /// Fail the run when more than this share of handlings (in percent of the messages sent)
    /// were duplicates. Default: duplicates never fail a run; they are reported.
    #[arg(long)]
    pub max_duplicates: Option<f64>,
    /// A concurrency limit on the run's job type: at most N handlers run at once across every
    /// worker. The run fails when the handlers' log shows more at once. A worker frozen by
    /// `--pause-every` for longer than the visibility timeout loses its slot with its claim, so
    /// a limited run is meant without pauses.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: Option<u32>,
    /// Keep the run's folder (log, worker output, queue files) instead of removing it.
    #[arg(long)]
    pub keep: bool,
    /// Faults put in on purpose, to show the run catches them.
    #[command(flatten)]
    pub sabotage: Sabotage,
}

/// Faults the workers put in on purpose, for the harness's own tests: a run with any of them
/// must fail.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct Sabotage {
    /// Each worker acknowledges every Nth message it handles without logging it: a loss (in a
    /// `groups` run, every Nth job of a batch).
    #[arg(long, hide = true)]
    pub sabotage_lose_every: Option<u64>,
    /// Each worker process exits by itself after handling N messages.
    #[arg(long, hide = true)]
    pub sabotage_exit_after: Option<u64>,
    /// The workers do not declare `--limit`: more handlers run at once than it allows.
    #[arg(long, hide = true)]
    pub sabotage_ignore_limit: bool,
    /// `groups` runs: each batch callback emits a copy of itself, which runs it again.
    #[arg(long, hide = true)]
    pub sabotage_rerun_callbacks: bool,
}

impl Sabotage {
    /// The arguments that give a worker process these faults.
    pub fn to_args(self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(n) = self.sabotage_lose_every {
            args.extend(["--sabotage-lose-every".to_owned(), n.to_string()]);
        }
        if let Some(n) = self.sabotage_exit_after {
            args.extend(["--sabotage-exit-after".to_owned(), n.to_string()]);
        }
        if self.sabotage_ignore_limit {
            args.push("--sabotage-ignore-limit".to_owned());
        }
        if self.sabotage_rerun_callbacks {
            args.push("--sabotage-rerun-callbacks".to_owned());
        }
        args
    }
}

/// The settings of one worker process.
#[derive(Debug, Clone, Args)]
pub struct WorkerArgs {
    /// The backend.
    #[arg(long, value_enum)]
    pub driver: DriverKind,
    /// Where the backend is: a URL, an endpoint or a folder.
    #[arg(long)]
    pub endpoint: String,
    /// The queue's name.
    #[arg(long)]
    pub queue: String,
    /// The visibility timeout.
    #[arg(long, value_parser = parse_duration)]
    pub visibility: Duration,
    /// How many messages are handled at once.
    #[arg(long)]
    pub concurrency: usize,
    /// The concurrency limit on the run's job type, across every worker.
    #[arg(long)]
    pub limit: Option<u32>,
    /// The log every handled message is appended to.
    #[arg(long)]
    pub log: PathBuf,
    /// Handle the batches and chains of a `groups` run instead of checked messages.
    #[arg(long)]
    pub groups: bool,
    /// The Redis URL of the store holding records and groups (RabbitMQ and SQS).
    #[arg(long)]
    pub store: Option<String>,
    /// The seed of the handlers' durations.
    #[arg(long)]
    pub seed: u64,
    /// How long the worker's dispatcher retries temporary driver errors before it exits
    /// (default: the dispatcher's, 5 minutes).
    #[arg(long, value_parser = parse_duration)]
    pub error_timeout: Option<Duration>,
    /// Faults put in on purpose.
    #[command(flatten)]
    pub sabotage: Sabotage,
}

/// Reads `1.5s`, `500ms`, `2m` or a plain number of seconds.
///
/// # Errors
/// A message naming the forms understood.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = match text.trim() {
        t if t.ends_with("ms") => (&t[..t.len() - 2], 0.001),
        t if t.ends_with('s') => (&t[..t.len() - 1], 1.0),
        t if t.ends_with('m') => (&t[..t.len() - 1], 60.0),
        t => (t, 1.0),
    };
    number
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0 && *n * unit < 1e9)
        .map(|n| Duration::from_secs_f64(n * unit))
        .ok_or_else(|| format!("{text:?} is not a duration such as 1.5s, 500ms, 2m or 3"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        for bad in ["", "s", "-1s", "1h", "NaNs", "1e20"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_command_line_parses() {
        Cli::command().debug_assert();
    }

    use clap::CommandFactory as _;
}
