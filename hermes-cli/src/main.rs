//! The `hermes` command: look at and repair Hermes queues.
//!
//! ```text
//! hermes --url file:///var/hermes?queue=exports stats
//! hermes --url redis://127.0.0.1:6379/0?key=hermes emit report.export --payload '{"report":"sales"}'
//! hermes --url amqp://guest:guest@127.0.0.1:5672/%2f?queue=hermes dead ls
//! hermes --config hermes.toml dead replay --all
//! hermes --url redis://127.0.0.1:6379 shutdown
//! ```
//!
//! The queue is named by a URL (`--url`, `HERMES_URL`, or the `url` of a `--config` file) that
//! the driver's crate reads. Exit status: 0 when it worked, 1 when the operation failed, 2 for
//! a usage error. An error is one line on standard error, without the URL. A command that does
//! not finish within `--timeout` (10 s; for `emit`, each message) fails.

mod args;
mod connect;
mod controls;
mod cron;
mod dashboard;
mod dead;
mod emit;
mod facet;
mod peek;
mod progress;
mod shutdown;
mod stats;
mod table;
mod tracking;
mod workers;

use std::fmt;
use std::process::ExitCode;

use clap::Parser;
use hermes_core::Emitter;

use crate::args::{Args, Command, CronCommand, WorkersCommand};

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
                | hermes_core::Error::ConfigFile { .. }
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
    let config = match &args.config {
        Some(path) => hermes_core::QueueConfig::load(path)?,
        None => hermes_core::QueueConfig::default(),
    };
    let url = args
        .url
        .as_deref()
        .or(config.url.as_deref())
        .ok_or_else(|| {
            Failure::usage("no queue: give --url (or HERMES_URL), or a --config file with a url")
        })?;
    let mut priorities = config.priorities.clone();
    priorities.extend(args.priorities.iter().cloned());
    let scheme = connect::scheme(url);
    let answered = |what: &str| {
        let what = what.to_owned();
        let timeout = args.timeout;
        move |_| {
            Failure::failed(format!(
                "{what}: no answer from the {scheme}:// backend within {}",
                table::seconds(timeout)
            ))
        }
    };
    let url = if let Command::Migrate = &args.command {
        &migrating(url)
    } else {
        url
    };
    let queue = tokio::time::timeout(args.timeout, connect::connect(url, &priorities))
        .await
        .map_err(answered("connecting"))??;
    let driver: std::sync::Arc<dyn hermes_core::Driver> = match &args.store {
        Some(store) => {
            let store = tokio::time::timeout(args.timeout, connect::connect(store, &[]))
                .await
                .map_err(answered("connecting to the store"))??;
            std::sync::Arc::new(hermes_core::driver::WithStore::new(queue.clone(), store))
        }
        None => std::sync::Arc::new(queue.clone()),
    };
    if let Command::Stats {
        json,
        watch: Some(every),
    } = &args.command
    {
        return stats::watch(&*driver, *json, *every, args.timeout).await;
    }
    if let Command::Dashboard { listen, read_only } = &args.command {
        return dashboard::serve(driver, *listen, *read_only, args.timeout).await;
    }
    if let Command::Emit { .. } = &args.command {
        // Each message gets the whole bound: a long --count is not cut short, and the ids
        // printed are those queued.
        return emit_each(args, &driver).await;
    }
    let done = async {
        match &args.command {
            Command::Stats { json, watch: _ } => stats::stats(&*driver, *json).await,
            Command::Emit { .. } | Command::Dashboard { .. } => Ok(()),
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
            Command::Shutdown(signal)
            | Command::Workers {
                command: Some(WorkersCommand::Stop(signal)),
                ..
            } => shutdown::shutdown(&queue, signal).await,
            Command::Workers {
                command: None,
                json,
            } => workers::list(&*driver, *json).await,
            Command::Cron {
                command: CronCommand::Ls { json },
            } => cron::list(&*driver, *json).await,
            Command::Cron {
                command: CronCommand::Run { name },
            } => cron::run(&*driver, name).await,
            Command::Migrate => migrated(&queue),
            Command::Pause(target) => controls::pause(&driver, &target.target()).await,
            Command::Resume(target) => controls::resume(&driver, &target.target()).await,
            Command::Paused { json } => controls::paused(&driver, *json).await,
            Command::Cancel { ids, by } => controls::cancel(&driver, ids, by.as_deref()).await,
            Command::Job { id, result, json } => tracking::job(&driver, id, *json, *result).await,
            Command::Batch { id, json } => tracking::batch(&driver, id, *json).await,
            Command::Workflow { id, json } => tracking::workflow(&driver, id, *json).await,
        }
    };
    tokio::time::timeout(args.timeout, done)
        .await
        .map_err(answered(args.command.name()))?
}

/// `url`, asking a PostgreSQL driver to migrate as it connects (the last `migrate` given
/// counts); any other URL as it is.
fn migrating(url: &str) -> String {
    if matches!(connect::scheme(url), "postgres" | "postgresql") {
        let joint = if url.contains('?') { '&' } else { '?' };
        format!("{url}{joint}migrate=true")
    } else {
        url.to_owned()
    }
}

/// What `hermes migrate` did: the driver connected, migrating first.
fn migrated(queue: &hermes::AnyDriver) -> Result<(), Failure> {
    match queue {
        hermes::AnyDriver::Postgres(driver) => {
            println!(
                "the schema {} is at version {}",
                driver.options().schema,
                hermes::postgres::SCHEMA_VERSION
            );
        }
        other => println!(
            "the {} backend has no tables to migrate",
            hermes_core::Driver::name(other)
        ),
    }
    Ok(())
}

/// `hermes emit`, each send bounded by `--timeout`.
async fn emit_each(
    args: &Args,
    driver: &std::sync::Arc<dyn hermes_core::Driver>,
) -> Result<(), Failure> {
    let Command::Emit {
        message_type,
        payload,
        payload_file,
        priority,
        delay,
        at,
        count,
    } = &args.command
    else {
        return Ok(());
    };
    let emit_args = emit::EmitArgs {
        message_type,
        payload: payload.as_deref(),
        payload_file: payload_file.as_deref(),
        priority: *priority,
        delay: *delay,
        at: *at,
        count: *count,
        timeout: args.timeout,
    };
    emit::emit(&Emitter::from_arc(driver.clone()), emit_args).await
}
