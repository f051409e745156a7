//! The `hermes` command: look at and repair Hermes queues.
//!
//! ```text
//! hermes --url file:///var/hermes?queue=exports stats
//! hermes --url file:///var/hermes?queue=exports emit report.export --payload '{"report":"sales"}'
//! hermes --url file:///var/hermes?queue=exports dead ls
//! hermes --url file:///var/hermes?queue=exports dead replay --all
//! ```
//!
//! The queue is named by a URL (`--url` or `HERMES_URL`) that the driver's crate reads. Exit
//! status: 0 when it worked, 1 when the operation failed, 2 for a usage error. An error is one
//! line on standard error.

mod args;
mod connect;
mod dead;
mod emit;
mod peek;
mod stats;
mod table;

use std::fmt;
use std::process::ExitCode;

use clap::Parser;
use hermes_core::Emitter;

use crate::args::{Args, Command};

/// Why the command did not do what it was asked.
pub(crate) struct Failure {
    usage: bool,
    message: String,
}

impl Failure {
    /// A usage error: exit status 2.
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Failure {
            usage: true,
            message: message.into(),
        }
    }

    /// A failed operation: exit status 1.
    pub(crate) fn failed(message: impl Into<String>) -> Self {
        Failure {
            usage: false,
            message: message.into(),
        }
    }
}

impl From<hermes_core::Error> for Failure {
    fn from(error: hermes_core::Error) -> Self {
        let usage = matches!(
            error,
            hermes_core::Error::Config { .. }
                | hermes_core::Error::InvalidQueueName { .. }
                | hermes_core::Error::UnknownPriority(_)
        );
        Failure {
            usage,
            message: error.to_string(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("hermes: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("hermes: {failure}");
            ExitCode::from(if failure.usage { 2 } else { 1 })
        }
    }
}

async fn run(args: &Args) -> Result<(), Failure> {
    let driver = connect::connect(&args.url, &args.priorities)?;
    match &args.command {
        Command::Stats { json } => stats::stats(&*driver, *json).await,
        Command::Emit {
            message_type,
            payload,
            payload_file,
            priority,
            delay,
            count,
        } => {
            let emit_args = emit::EmitArgs {
                message_type,
                payload: payload.as_deref(),
                payload_file: payload_file.as_deref(),
                priority: *priority,
                delay: *delay,
                count: *count,
            };
            emit::emit(&Emitter::from_arc(driver.clone()), emit_args).await
        }
        Command::Peek {
            state,
            priority,
            limit,
            json,
        } => peek::peek(&*driver, *priority, *state, *limit, *json).await,
        Command::Dead { command, priority } => dead::dead(&*driver, *priority, command).await,
        Command::Purge {
            state,
            priority,
            yes,
        } => peek::purge(&*driver, *priority, *state, *yes).await,
    }
}
