//! An emit as SQL and plain parameters, for any client.

use std::fmt;

use hermes_core::{Error, Message, Priority};

use crate::core::Core;

/// A parameter of an [`EmitStatement`]: a PostgreSQL `text`, `integer`, `double precision` or
/// `bytea`, in the order of the statement's `$1`, `$2`, …
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub enum SqlValue {
    /// A `text`.
    Text(String),
    /// An `integer` (`int4`).
    Integer(i32),
    /// A `double precision` (`float8`).
    Double(f64),
    /// A `bytea`: an encoded message.
    Bytes(Vec<u8>),
}

impl fmt::Debug for SqlValue {
    /// Bytes are shown by their length alone: they hold a payload.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SqlValue::Text(text) => f.debug_tuple("Text").field(text).finish(),
            SqlValue::Integer(n) => f.debug_tuple("Integer").field(n).finish(),
            SqlValue::Double(x) => f.debug_tuple("Double").field(x).finish(),
            SqlValue::Bytes(bytes) => write!(f, "Bytes({} bytes)", bytes.len()),
        }
    }
}

/// The statement that queues one or more messages, with its parameters: run it in a
/// transaction of any client and the messages exist if and only if the transaction commits.
/// It notifies the schema's channel too, which PostgreSQL delivers at the commit.
///
/// ```no_run
/// # async fn example(driver: hermes_postgres::PostgresDriver) -> Result<(), hermes_core::Error> {
/// use hermes_core::{DEFAULT_PRIORITY, Message};
/// use hermes_postgres::SqlValue;
///
/// let message = Message::builder("welcome-mail").build()?;
/// let statement = driver.emit_statement(&message, DEFAULT_PRIORITY)?;
/// for (i, value) in statement.params().iter().enumerate() {
///     match value {
///         SqlValue::Text(text) => { /* bind ${i + 1} as text */ }
///         SqlValue::Integer(n) => { /* … as an integer */ }
///         SqlValue::Double(x) => { /* … as a double precision */ }
///         SqlValue::Bytes(bytes) => { /* … as a bytea */ }
///         _ => unreachable!("no other kind of value is made"),
///     }
/// }
/// // …then run statement.sql() with them, in the application's transaction.
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct EmitStatement {
    sql: String,
    params: Vec<SqlValue>,
    ids: Vec<String>,
}

/// The most messages one statement holds: each takes three parameters, and a statement takes
/// at most 65,535.
pub(crate) const MAX_PER_STATEMENT: usize = 10_000;

impl EmitStatement {
    /// The SQL text. It names the driver's schema, and nothing else that came from outside.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// The parameters, `$1` first.
    pub fn params(&self) -> &[SqlValue] {
        &self.params
    }

    /// The ids of the messages it queues, in order.
    pub fn message_ids(&self) -> &[String] {
        &self.ids
    }
}

impl Core {
    /// The statement queueing `messages` on the queue of `priority`.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`]; [`Error::InvalidMessage`] for none or more than
    /// [`MAX_PER_STATEMENT`] messages; those of checking and serializing a message.
    pub(crate) fn emit_statement(
        &self,
        messages: &[Message],
        priority: Priority,
    ) -> Result<EmitStatement, Error> {
        if messages.is_empty() {
            return Err(Error::InvalidMessage(
                "no message to put in the statement".to_owned(),
            ));
        }
        if messages.len() > MAX_PER_STATEMENT {
            return Err(Error::InvalidMessage(format!(
                "{} messages in one statement, more than {MAX_PER_STATEMENT}",
                messages.len()
            )));
        }
        let queue = self.queues.get(priority)?;
        let mut params = vec![
            SqlValue::Text(queue),
            SqlValue::Integer(priority),
            SqlValue::Text(self.channel.clone()),
        ];
        let mut ids = Vec::with_capacity(messages.len());
        let mut rows = Vec::with_capacity(messages.len());
        for message in messages {
            let row = self.encode(message, priority)?;
            let n = params.len();
            rows.push(format!(
                "($1, $2, GREATEST(${}, {}), ${}, ${})",
                n + 1,
                crate::client::NOW,
                n + 2,
                n + 3
            ));
            params.push(SqlValue::Double(row.due));
            params.push(SqlValue::Bytes(row.body));
            params.push(SqlValue::Text(row.id.clone()));
            ids.push(row.id);
        }
        let sql = format!(
            "WITH j AS (INSERT INTO {}.jobs (queue, priority, due_at, body, message_id) \
             VALUES {} RETURNING 1) SELECT pg_notify($3, $1) FROM j LIMIT 1",
            crate::naming::quoted(&self.options.schema),
            rows.join(", ")
        );
        Ok(EmitStatement { sql, params, ids })
    }
}
