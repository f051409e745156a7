//! Sending: a message due now is added to its priority's set (`SADD`), a delayed one to the
//! schedule; idle workers are woken after.

use hermes_core::time::unix_now;
use hermes_core::{Error, Message, Priority};

use crate::core::Core;

impl Core {
    pub(crate) async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        message.check()?;
        let key = self.sets.get(priority)?;
        let body = self.serializer.serialize(message)?;
        match message.execute_at() {
            Some(at) if at > unix_now() => self.schedule(at, &body, priority, &[]).await?,
            _ => {
                self.client
                    .command("SADD", &[key.as_bytes(), &body])
                    .await?;
            }
        }
        self.wake_workers();
        Ok(())
    }

    /// One round trip for the whole batch, as the driver's `send_batch` tells.
    pub(crate) async fn send_batch(
        &self,
        messages: &[Message],
        priority: Priority,
    ) -> Result<(), Error> {
        let key = self.sets.get(priority)?;
        let now = unix_now();
        let mut due_now: Vec<Vec<u8>> = Vec::new();
        let mut later: Vec<(f64, Vec<u8>)> = Vec::new();
        for message in messages {
            message.check()?;
            let body = self.serializer.serialize(message)?;
            match message.execute_at() {
                Some(at) if at > now => later.push((at, body)),
                _ => due_now.push(body),
            }
        }
        if messages.is_empty() {
            return Ok(());
        }
        let add = async {
            if due_now.is_empty() {
                return Ok(());
            }
            let mut args: Vec<&[u8]> = Vec::with_capacity(due_now.len() + 1);
            args.push(key.as_bytes());
            args.extend(due_now.iter().map(Vec::as_slice));
            self.client.command("SADD", &args).await.map(drop)
        };
        let schedule = futures_util::future::try_join_all(
            later
                .iter()
                .map(|(at, body)| self.schedule(*at, body, priority, &[])),
        );
        futures_util::try_join!(add, schedule)?;
        self.wake_workers();
        Ok(())
    }
}
