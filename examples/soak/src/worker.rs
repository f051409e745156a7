//! The `worker` role: one worker process of a run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_core::flow::Limits;
use hermes_core::{Dispatcher, DispatcherOptions, Driver, Emitter, SignalShutdown};

use crate::args::{Sabotage, WorkerArgs};
use crate::groups::jobs::GroupLog;
use crate::handler::SoakHandler;
use crate::payload::SOAK;
use crate::target::Target;

/// How long a worker that starts while the broker is down keeps trying to connect.
const CONNECT_FOR: Duration = Duration::from_secs(60);

/// Handles the run's messages until SIGTERM or SIGINT.
///
/// # Errors
/// When the backend cannot be reached, or the dispatcher stops with an error.
pub async fn run(args: WorkerArgs) -> Result<(), String> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let shutdown = SignalShutdown::install().map_err(|e| e.to_string())?;
    let driver = connect(&Target::of_worker(&args), args.concurrency).await?;
    let name = std::process::id().to_string();
    let handlers = if args.groups {
        GroupLog::new(&args.log, name, args.seed, args.sabotage).map(Handlers::Groups)
    } else {
        SoakHandler::new(&args.log, name, args.seed)
            .map(|handler| Handlers::Checked(handler.sabotaged(args.sabotage)))
    }
    .map_err(|e| format!("cannot open the log {:?}: {e}", args.log))?;
    let mut options = DispatcherOptions::default();
    if let Some(timeout) = args.error_timeout {
        options.temporary_error_timeout = timeout;
    }
    let mut dispatcher = Dispatcher::from_arc(driver)
        .with_shutdown(shutdown)
        .options(options)
        .concurrency(args.concurrency);
    handlers.register(&mut dispatcher, args.limit, args.sabotage)?;
    dispatcher.handle(&[]).await.map_err(|e| e.to_string())
}

/// What a worker's dispatcher runs.
#[derive(Debug)]
pub enum Handlers {
    /// The checked messages of a run.
    Checked(SoakHandler),
    /// The batches and chains of a `groups` run.
    Groups(GroupLog),
}

impl Handlers {
    /// Registers the handlers on `dispatcher`, with the run's concurrency limit on checked
    /// messages unless `sabotage` says to ignore it.
    ///
    /// # Errors
    /// A limit the dispatcher refuses.
    pub fn register(
        self,
        dispatcher: &mut Dispatcher,
        limit_to: Option<u32>,
        sabotage: Sabotage,
    ) -> Result<(), String> {
        match self {
            Handlers::Checked(handler) => {
                dispatcher.register_handler(SOAK, Arc::new(handler));
                limit(dispatcher, limit_to, sabotage)
            }
            Handlers::Groups(log) => {
                let emitter = Emitter::from_arc(dispatcher.driver().clone());
                crate::groups::jobs::register(dispatcher, Arc::new(log), emitter);
                Ok(())
            }
        }
    }
}

/// Declares the run's concurrency limit on `dispatcher`, unless `sabotage` says to ignore it.
///
/// # Errors
/// A limit the dispatcher refuses.
pub fn limit(
    dispatcher: &mut Dispatcher,
    limit: Option<u32>,
    sabotage: Sabotage,
) -> Result<(), String> {
    match limit {
        Some(n) if !sabotage.sabotage_ignore_limit => dispatcher
            .limit(SOAK, Limits::new().concurrency(n))
            .map(drop)
            .map_err(|e| e.to_string()),
        _ => Ok(()),
    }
}

/// Connects, retrying temporary errors for up to [`CONNECT_FOR`]: a worker started while the
/// broker restarts waits for it, as the dispatcher does.
async fn connect(target: &Target, concurrency: usize) -> Result<Arc<dyn Driver>, String> {
    let started = Instant::now();
    loop {
        match target.connect(concurrency).await {
            Ok(driver) => return Ok(driver),
            Err(e) if e.is_temporary() && started.elapsed() < CONNECT_FOR => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}
