//! The command line.

use std::time::Duration;

use clap::{Parser, Subcommand};
use hermes_core::{Priority, QueueState};

/// Look at and repair Hermes queues.
#[derive(Debug, Parser)]
#[command(name = "hermes", version)]
pub(crate) struct Args {
    /// The queue, as a URL: file:///var/hermes?queue=exports.
    #[arg(long, env = "HERMES_URL", hide_env_values = true)]
    pub(crate) url: String,
    /// A priority queue to know of besides the default one, as NAME=PRIORITY (repeatable).
    #[arg(long = "priority", value_name = "NAME=N", value_parser = priority_queue)]
    pub(crate) priorities: Vec<(String, Priority)>,
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
        #[arg(long, value_parser = duration)]
        delay: Option<Duration>,
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
    }
}
