//! Sending: a message is a row inserted with its due time, and a notification to the schema's
//! channel in the same statement, so a listening worker wakes when the row commits.

use hermes_core::{Error, Message, Priority};
use tokio_postgres::types::ToSql;

use crate::core::Core;

/// A message made ready for its row.
pub(crate) struct Encoded {
    pub(crate) queue: String,
    /// Unix seconds; 0 for now (the server's clock then decides).
    pub(crate) due: f64,
    pub(crate) body: Vec<u8>,
    pub(crate) id: String,
    pub(crate) priority: Priority,
}

impl Encoded {
    /// The parameters `$1` to `$6` of the statements inserting one row: queue, priority, due,
    /// body, the channel to notify, message id.
    pub(crate) fn params<'a>(&'a self, channel: &'a String) -> [&'a (dyn ToSql + Sync); 6] {
        [
            &self.queue,
            &self.priority,
            &self.due,
            &self.body,
            channel,
            &self.id,
        ]
    }
}

impl Core {
    /// Checks `message` and encodes it for the queue of `priority`.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`], and those of checking and serializing the message.
    pub(crate) fn encode(&self, message: &Message, priority: Priority) -> Result<Encoded, Error> {
        message.check()?;
        Ok(Encoded {
            queue: self.queues.get(priority)?,
            due: message.execute_at().unwrap_or(0.0),
            body: self.serializer.serialize(message)?,
            id: message.id().to_owned(),
            priority,
        })
    }

    /// One statement: the row and its notification.
    pub(crate) async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        let row = self.encode(message, priority)?;
        self.on_connection("a send", |client| async move {
            let statement = client.prepare_cached(&self.sql.insert).await?;
            client
                .query(&statement, &row.params(&self.channel))
                .await
                .map(drop)
        })
        .await
    }

    /// One statement for the whole batch, in order, with one notification.
    pub(crate) async fn send_batch(
        &self,
        messages: &[Message],
        priority: Priority,
    ) -> Result<(), Error> {
        if messages.is_empty() {
            return Ok(());
        }
        let queue = self.queues.get(priority)?;
        let mut dues = Vec::with_capacity(messages.len());
        let mut bodies = Vec::with_capacity(messages.len());
        let mut ids = Vec::with_capacity(messages.len());
        for message in messages {
            let row = self.encode(message, priority)?;
            dues.push(row.due);
            bodies.push(row.body);
            ids.push(row.id);
        }
        self.on_connection("a batch send", |client| async move {
            let statement = client.prepare_cached(&self.sql.insert_batch).await?;
            client
                .query(
                    &statement,
                    &[&queue, &priority, &dues, &bodies, &self.channel, &ids],
                )
                .await
                .map(drop)
        })
        .await
    }
}
