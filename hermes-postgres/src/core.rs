//! What the clones of a [`PostgresDriver`](crate::PostgresDriver) share: the pool, the options,
//! the queues by priority, the serializer, the statements and the listener; and a claim.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Mutex, Weak};

use hermes_core::driver::{CALL_TIMEOUT, Capabilities, PriorityQueues, bounded};
use hermes_core::{Error, Priority, Serializer};

use crate::PostgresOptions;
use crate::client::{Listener, Sql};
use crate::error::{pool_error, postgres_error};
use crate::naming::channel;

/// The shared state of one driver and its clones.
pub(crate) struct Core {
    pub(crate) pool: deadpool_postgres::Pool,
    pub(crate) options: PostgresOptions,
    pub(crate) queues: PriorityQueues<String>,
    pub(crate) serializer: Arc<dyn Serializer>,
    pub(crate) sql: Arc<Sql>,
    /// When this driver last removed expired uniqueness keys, as Unix seconds.
    pub(crate) keys_swept: AtomicU64,
    /// The channel of the schema's notifications.
    pub(crate) channel: String,
    /// Notifications for idle workers; none when [`PostgresOptions::listen`] is off.
    pub(crate) listener: Option<Arc<Listener>>,
    /// This core, for the tasks of the facets (which have it by reference).
    pub(crate) this: Weak<Core>,
    /// Rows claimed ahead, in claim order, waiting for a `receive`.
    buffer: Mutex<VecDeque<Held>>,
    /// One claim at a time fills the buffer; the claim's task holds it to its end, and `flush`
    /// takes it first, so no claim adds rows after a flush.
    pub(crate) fetching: Arc<tokio::sync::Mutex<()>>,
    /// Whether the task giving back rows held too long runs.
    pub(crate) sweeper: AtomicBool,
    /// Acknowledged claims whose rows are still to be deleted.
    pub(crate) acked: Mutex<Vec<Claim>>,
    /// Whether a task will delete the acknowledged rows soon.
    pub(crate) flush_scheduled: AtomicBool,
    /// Rows this driver deleted since it last vacuumed the table.
    pub(crate) deleted_rows: AtomicU64,
    /// When it last vacuumed.
    pub(crate) last_prune: Mutex<Option<tokio::time::Instant>>,
    /// Whether it vacuums now.
    pub(crate) pruning: AtomicBool,
}

impl fmt::Debug for Core {
    /// The schema and the queues: never the connection's settings, which hold the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Core")
            .field("schema", &self.options.schema)
            .field("queues", &self.queues.all())
            .finish_non_exhaustive()
    }
}

/// A claim of a row: the row and the claim's token. Settling a claim that expired (another
/// claim holds the row now) changes nothing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Claim {
    pub(crate) id: i64,
    pub(crate) lease: i64,
}

/// A claimed row waiting in the buffer: its claim, priority, due time (Unix seconds, as the
/// row has it) and body, and when it was claimed.
pub(crate) struct Held {
    pub(crate) claim: Claim,
    pub(crate) priority: Priority,
    pub(crate) due: f64,
    pub(crate) body: Vec<u8>,
    pub(crate) at: tokio::time::Instant,
}

impl fmt::Debug for Held {
    /// The body by its length alone: it holds a payload.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Held")
            .field("claim", &self.claim)
            .field("priority", &self.priority)
            .field("due", &self.due)
            .field("body_len", &self.body.len())
            .finish_non_exhaustive()
    }
}

impl Core {
    /// The state of a driver on `pool`, whose default queue is `queue`.
    pub(crate) fn new(
        pool: deadpool_postgres::Pool,
        listen: Option<tokio_postgres::Config>,
        queue: &str,
        options: PostgresOptions,
        serializer: Arc<dyn Serializer>,
    ) -> Arc<Self> {
        let channel = channel(&options.schema);
        let listener = listen.map(|config| Arc::new(Listener::new(config, channel.clone())));
        let queues = PriorityQueues::with(hermes_core::DEFAULT_PRIORITY, queue.to_owned());
        let sql = Arc::new(Sql::new(&options.schema));
        Core::assemble(pool, options, queues, serializer, sql, channel, listener)
    }

    /// The same queues, pool, statements and listener, with `serializer`; nothing of this
    /// process's claims.
    pub(crate) fn anew(&self, serializer: Arc<dyn Serializer>) -> Arc<Self> {
        Core::assemble(
            self.pool.clone(),
            self.options.clone(),
            self.queues.clone(),
            serializer,
            Arc::clone(&self.sql),
            self.channel.clone(),
            self.listener.clone(),
        )
    }

    fn assemble(
        pool: deadpool_postgres::Pool,
        options: PostgresOptions,
        queues: PriorityQueues<String>,
        serializer: Arc<dyn Serializer>,
        sql: Arc<Sql>,
        channel: String,
        listener: Option<Arc<Listener>>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|this| Core {
            pool,
            options,
            queues,
            serializer,
            sql,
            channel,
            listener,
            this: this.clone(),
            keys_swept: AtomicU64::new(0),
            buffer: Mutex::default(),
            fetching: Arc::default(),
            sweeper: AtomicBool::new(false),
            acked: Mutex::default(),
            flush_scheduled: AtomicBool::new(false),
            deleted_rows: AtomicU64::new(0),
            last_prune: Mutex::default(),
            pruning: AtomicBool::new(false),
        })
    }

    /// The rows claimed ahead.
    pub(crate) fn buffer(&self) -> std::sync::MutexGuard<'_, VecDeque<Held>> {
        self.buffer.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn capabilities(&self) -> Capabilities {
        Capabilities::all()
    }

    /// Runs `call` on a connection of the pool, within [`CALL_TIMEOUT`] in all (`what` names
    /// it in errors).
    pub(crate) async fn on_connection<T, F>(
        &self,
        what: &str,
        call: impl FnOnce(deadpool_postgres::Client) -> F,
    ) -> Result<T, Error>
    where
        F: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        bounded(crate::NAME, what, CALL_TIMEOUT, async {
            let client = self.pool.get().await.map_err(pool_error)?;
            call(client).await.map_err(postgres_error)
        })
        .await
    }
}
