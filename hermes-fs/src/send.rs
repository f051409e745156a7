//! Sending: a message file written to `tmp/`, then renamed into `new/` under a name that
//! starts with its due time, so name order is due order and a delayed message simply waits.

use std::sync::Arc;

use hermes_core::{Error, Message, Priority};

use crate::core::Core;
use crate::files::QueueDir;

impl Core {
    pub(crate) async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        let (queue, body) = self.encode(message, priority)?;
        self.write_encoded(&queue, body, message.due()).await
    }

    /// The queue of `priority` and the checked, encoded `message`.
    pub(crate) fn encode(
        &self,
        message: &Message,
        priority: Priority,
    ) -> Result<(Arc<QueueDir>, Vec<u8>), Error> {
        message.check()?;
        let queue = self.queues.get(priority)?;
        let body = self.serializer.serialize(message)?;
        Ok((queue, body))
    }

    /// Writes the encoded message `body`, due at `due`, into `queue`.
    pub(crate) async fn write_encoded(
        &self,
        queue: &Arc<QueueDir>,
        body: Vec<u8>,
        due: f64,
    ) -> Result<(), Error> {
        queue.ensure_created()?;
        let file = if self.options.durable {
            let queue = queue.clone();
            hermes_core::driver::task::detached_blocking(move || queue.write(&body, due, true))
                .await?
        } else {
            queue.write(&body, due, false)?
        };
        self.written(queue, &file);
        Ok(())
    }

    /// Writes the encoded message `body`, due at `due`, into `queue`, on this thread: for a
    /// caller holding a lock it may not keep across an `await`.
    pub(crate) fn write_encoded_now(
        &self,
        queue: &Arc<QueueDir>,
        body: &[u8],
        due: f64,
    ) -> Result<(), Error> {
        queue.ensure_created()?;
        let file = queue.write(body, due, self.options.durable)?;
        self.written(queue, &file);
        Ok(())
    }

    /// Tells the waiting receivers of `queue` of its new `file`.
    fn written(&self, queue: &QueueDir, file: &str) {
        if queue.lock().scanned {
            queue.added(file);
            self.wake.notify_waiters();
        }
    }
}
