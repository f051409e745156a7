//! The PostgreSQL driver: its public type, its constructors, and the contract it keeps.

use std::sync::Arc;
use std::time::Duration;

use hermes_core::driver::{
    Browse, Capabilities, Controls, Counters, DeadLetters, Delivery, Inspect, JobStore, LimitStore,
    UniqueEmits, Workers, async_trait, validate_queue_name,
};
use hermes_core::{Driver, Error, Job, JsonSerializer, Message, Priority, Serializer};

use crate::PostgresOptions;
use crate::core::Core;
use crate::emit_in::{EmitStatement, EmitTarget, MAX_PER_STATEMENT};
use crate::naming::check_schema;
use crate::url::{UrlConfig, database_config};

/// Hermes' PostgreSQL driver: each message is a row of the table `<schema>.jobs`, beside the
/// application's data.
///
/// - `send` inserts the row, due at the message's `execute_at` (or now, by the server's
///   clock), and notifies the schema's channel in the same statement: a listening worker
///   wakes when the row commits, never before. `send_batch` inserts the whole batch in one
///   statement.
/// - `receive` claims up to [`PostgresOptions::prefetch`] due rows of the selected queues,
///   highest priority first and in due order within a priority (oldest first among rows due
///   together), with `FOR UPDATE SKIP LOCKED`, and leases them for
///   [`PostgresOptions::visibility_timeout`]; the rows it does not hand out at once wait in
///   this process for the next `receive`, for half the visibility timeout at most (and are
///   handed out before a message of a higher priority that arrived since). A lease that ran
///   out returns its row to its queue. A row that cannot be decoded becomes a dead
///   letter.
/// - `ack` deletes the row, with the next claim ([`PostgresOptions::deferred_acks`]) or at
///   once; `nack` gives it back at once; `extend` moves its lease's end. Every one applies
///   to its own claim only. `flush` gives back the rows claimed ahead and deletes the
///   acknowledged ones.
/// - Idle workers wait for a notification on a connection of their own
///   ([`PostgresOptions::listen`]), for the next due row, or for the refresh interval.
///
/// The schema is created and upgraded by the migrations embedded in the crate
/// ([`migrate`](PostgresDriver::migrate)). Every call of the driver's contract is bounded by
/// [`CALL_TIMEOUT`](hermes_core::driver::CALL_TIMEOUT) (a migration is not: it may wait for
/// another process's); a lost connection is a temporary error, and the pool opens a new one.
/// Clones are cheap and share the pool.
#[derive(Debug, Clone)]
pub struct PostgresDriver {
    core: Arc<Core>,
}

impl PostgresDriver {
    /// Connects to `database` (a `postgres://user:password@host:port/db` URL or a
    /// `key=value` connection string, without the driver's parameters) with `options`; the
    /// default queue is `queue`. Runs the migrations first, or with
    /// [`PostgresOptions::migrate`] off, checks the schema's version.
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), hermes_core::Error> {
    /// use hermes_postgres::{PostgresDriver, PostgresOptions};
    ///
    /// let driver = PostgresDriver::connect(
    ///     "postgres://app@127.0.0.1:5432/shop",
    ///     "mails",
    ///     PostgresOptions::default(),
    /// )
    /// .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] for bad connection settings, a bad schema name, refused credentials,
    /// or a schema of another version; [`Error::InvalidQueueName`] for a bad queue name; a
    /// temporary error when the server cannot be reached.
    pub async fn connect(
        database: &str,
        queue: &str,
        options: PostgresOptions,
    ) -> Result<Self, Error> {
        let config = database_config(database)?;
        PostgresDriver::connect_with(config, queue, options).await
    }

    /// Connects to the queue a URL names, as the `hermes` command and programs that take their
    /// queue from the environment do: `postgres://[user[:password]@]host[:port]/db` (or
    /// `postgresql://`), with the connection's own parameters and these, all optional, with
    /// the defaults of [`PostgresOptions`]: `queue` (the default queue, `hermes`), `schema`
    /// (`hermes`), `visibility_timeout` and `refresh_interval` (seconds), `listen`, `migrate`,
    /// `deferred_acks` and `prune` (`true` or `false`), `pool_size` and `prefetch` (counts).
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), hermes_core::Error> {
    /// use hermes_postgres::PostgresDriver;
    ///
    /// let driver = PostgresDriver::from_url("postgres://app@127.0.0.1/shop?queue=mails").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] for a URL of another scheme, an unknown parameter or a bad value,
    /// and as [`connect`](PostgresDriver::connect). No error shows the password.
    pub async fn from_url(url: &str) -> Result<Self, Error> {
        let config = UrlConfig::parse(url)?;
        PostgresDriver::connect_with(config.database, &config.queue, config.options).await
    }

    async fn connect_with(
        database: tokio_postgres::Config,
        queue: &str,
        options: PostgresOptions,
    ) -> Result<Self, Error> {
        check_schema(&options.schema)?;
        crate::config::check(&options)?;
        validate_queue_name(queue)?;
        let pool = crate::client::pool(database.clone(), options.pool_size)?;
        let listen = options.listen.then_some(database);
        let migrate = options.migrate;
        let core = Core::new(pool, listen, queue, options, Arc::new(JsonSerializer));
        if migrate {
            core.migrate().await?;
        } else {
            core.check_schema_version().await?;
        }
        Ok(PostgresDriver { core })
    }

    /// Brings the schema to the version this code needs, creating it when missing; does
    /// nothing when it is there already. Safe to run from several processes at once.
    ///
    /// # Errors
    /// [`Error::Config`] when the schema is newer than this code; the server's errors.
    pub async fn migrate(&self) -> Result<(), Error> {
        self.core.migrate().await
    }

    /// The same queues, on the same pool, with `serializer` instead of [`JsonSerializer`], as
    /// a new instance.
    #[must_use]
    pub fn with_serializer(self, serializer: impl Serializer) -> Self {
        PostgresDriver {
            core: self.core.anew(Arc::new(serializer)),
        }
    }

    /// Queues `message` on the queue of `priority` through `target`, a transaction of the
    /// application's own client: the message exists if and only if the transaction commits,
    /// and idle workers wake when it does, never before. Logs
    /// `Emitter send message #<id> to driver postgres` once the statement ran (the
    /// transaction may still roll back).
    ///
    /// ```no_run
    /// # #[cfg(feature = "tokio-postgres")]
    /// # async fn example(
    /// #     driver: hermes_postgres::PostgresDriver,
    /// #     client: &mut tokio_postgres::Client,
    /// # ) -> Result<(), Box<dyn std::error::Error>> {
    /// use hermes_core::{DEFAULT_PRIORITY, Message};
    ///
    /// let transaction = client.transaction().await?;
    /// transaction
    ///     .execute("INSERT INTO users (email) VALUES ($1)", &[&"ada@example.com"])
    ///     .await?;
    /// let welcome = Message::builder("welcome-mail")
    ///     .payload(&serde_json::json!({"to": "ada@example.com"}))
    ///     .build()?;
    /// driver.emit_in(&transaction, &welcome, DEFAULT_PRIORITY).await?;
    /// transaction.commit().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::UnknownPriority`]; those of checking and serializing the message; the
    /// client's errors (the transaction is then aborted, as for any failed statement).
    ///
    /// # Cancellation safety
    /// As the client's: dropping the future may or may not have run the statement, and the
    /// transaction decides whether the row exists.
    pub async fn emit_in(
        &self,
        target: impl EmitTarget,
        message: &Message,
        priority: Priority,
    ) -> Result<(), Error> {
        self.emit_batch_in(target, std::slice::from_ref(message), priority)
            .await
    }

    /// Queues `job` as [`emit_in`](PostgresDriver::emit_in) does, on the queue of
    /// `J::PRIORITY`, and returns its message id.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] when the job does not serialize to a JSON object or array;
    /// as [`emit_in`](PostgresDriver::emit_in).
    ///
    /// # Cancellation safety
    /// As [`emit_in`](PostgresDriver::emit_in).
    pub async fn emit_job_in<J: Job>(
        &self,
        target: impl EmitTarget,
        job: &J,
    ) -> Result<String, Error> {
        let message = Message::from_job(job)?;
        self.emit_in(target, &message, J::PRIORITY).await?;
        Ok(message.id().to_owned())
    }

    /// Queues `messages`, in order, as [`emit_in`](PostgresDriver::emit_in) does, in one
    /// statement per 10,000 messages. Nothing is sent for none.
    ///
    /// # Errors
    /// As [`emit_in`](PostgresDriver::emit_in); every message is checked before anything is
    /// sent.
    ///
    /// # Cancellation safety
    /// As [`emit_in`](PostgresDriver::emit_in): the transaction decides.
    pub async fn emit_batch_in(
        &self,
        target: impl EmitTarget,
        messages: &[Message],
        priority: Priority,
    ) -> Result<(), Error> {
        let statements = messages
            .chunks(MAX_PER_STATEMENT)
            .map(|chunk| self.core.emit_statement(chunk, priority))
            .collect::<Result<Vec<_>, Error>>()?;
        let mut target = target;
        for statement in &statements {
            target.run(statement).await?;
        }
        for message in messages {
            hermes_core::telemetry::record_sent(message, priority, crate::NAME, false);
        }
        Ok(())
    }

    /// The statement that queues `message` on the queue of `priority`, for a client without
    /// an [`EmitTarget`]: run it in the application's transaction.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`]; those of checking and serializing the message.
    pub fn emit_statement(
        &self,
        message: &Message,
        priority: Priority,
    ) -> Result<EmitStatement, Error> {
        self.core
            .emit_statement(std::slice::from_ref(message), priority)
    }

    /// The statement that queues `messages` (at least one, at most 10,000), in order, on the
    /// queue of `priority`.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] for none or more than 10,000 messages; as
    /// [`emit_statement`](PostgresDriver::emit_statement).
    pub fn emit_batch_statement(
        &self,
        messages: &[Message],
        priority: Priority,
    ) -> Result<EmitStatement, Error> {
        self.core.emit_statement(messages, priority)
    }

    /// The options the driver was built with.
    pub fn options(&self) -> &PostgresOptions {
        &self.core.options
    }
}

#[async_trait]
impl Driver for PostgresDriver {
    fn name(&self) -> &'static str {
        crate::NAME
    }

    fn capabilities(&self) -> Capabilities {
        self.core.capabilities()
    }

    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        validate_queue_name(name)?;
        self.core.queues.insert(priority, name.to_owned());
        Ok(())
    }

    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        self.core.send(message, priority).await
    }

    /// One statement for the whole batch: all of it is queued, or none.
    async fn send_batch(&self, messages: &[Message], priority: Priority) -> Result<(), Error> {
        self.core.send_batch(messages, priority).await
    }

    async fn receive(
        &self,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        self.core.receive(priorities, wait).await
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.core.ack(delivery).await
    }

    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.core.nack(delivery).await
    }

    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        self.core.extend(delivery, by).await
    }

    /// Gives back the rows claimed ahead and deletes the rows acknowledged but not yet
    /// deleted.
    async fn flush(&self) -> Result<(), Error> {
        self.core.flush().await
    }

    /// Exact figures, each counted on an index of the table.
    fn inspect(&self) -> Option<&dyn Inspect> {
        Some(&*self.core)
    }

    fn browse(&self) -> Option<&dyn Browse> {
        Some(&*self.core)
    }

    /// Kept in `<schema>.dead_letters` under [`PostgresOptions::retention`].
    fn dead_letters(&self) -> Option<&dyn DeadLetters> {
        Some(&*self.core)
    }

    fn workers(&self) -> Option<&dyn Workers> {
        Some(&*self.core)
    }

    /// Keys in `<schema>.unique_keys`, taken in the statement that inserts the row.
    fn unique(&self) -> Option<&dyn UniqueEmits> {
        Some(&*self.core)
    }

    fn limits(&self) -> Option<&dyn LimitStore> {
        Some(&*self.core)
    }

    fn controls(&self) -> Option<&dyn Controls> {
        Some(&*self.core)
    }

    fn jobs(&self) -> Option<&dyn JobStore> {
        Some(&*self.core)
    }

    fn counters(&self) -> Option<&dyn Counters> {
        Some(&*self.core)
    }
}
