//! Sending: a message checked, encoded and routed (see `delay`), returning once the broker
//! confirmed it; a batch published in one go, its confirms awaited together. A message the
//! broker refuses is published again (see `amqp::again_while_refused`).

use hermes_core::{Error, Message, Priority};

use crate::NAME;
use crate::amqp::{Answer, Published};
use crate::core::Core;

impl Core {
    pub(crate) async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        message.check()?;
        let target = self.queues.get(priority)?;
        let body = self.serializer.serialize(message)?;
        let session = self.session().await?;
        let route = self.route(&session, &target, &body, message.execute_at());
        session.bounded("publishing", route).await
    }

    /// Publishes every message of the batch in order, then waits for all their confirms
    /// together. Every message is checked and encoded before anything is published.
    pub(crate) async fn send_batch(
        &self,
        messages: &[Message],
        priority: Priority,
    ) -> Result<(), Error> {
        let target = self.queues.get(priority)?;
        let mut bodies = Vec::with_capacity(messages.len());
        for message in messages {
            message.check()?;
            bodies.push((self.serializer.serialize(message)?, message.execute_at()));
        }
        if bodies.is_empty() {
            return Ok(());
        }
        let session = self.session().await?;
        let publish = async {
            let mut published = Vec::with_capacity(bodies.len());
            for (body, due) in &bodies {
                published.push(self.start_route(&session, &target, body, *due).await?);
            }
            let answers =
                futures_util::future::join_all(published.into_iter().map(Published::answer)).await;
            let mut failed = Vec::new();
            for ((body, due), answer) in bodies.iter().zip(answers) {
                // A refused message goes again, on its own, in the batch's order.
                let outcome = match answer {
                    Ok(Answer::Taken) => Ok(()),
                    Ok(Answer::Refused(_)) => self.route(&session, &target, body, *due).await,
                    Err(error) => Err(error),
                };
                failed.extend(outcome.err());
            }
            let mut failed = failed.into_iter();
            let Some(first) = failed.next() else {
                return Ok(());
            };
            match failed.count() {
                0 => Err(first),
                others => Err(Error::driver(
                    NAME,
                    format!(
                        "{} of {} messages for {target} were not confirmed: {first}",
                        others + 1,
                        bodies.len()
                    ),
                    true,
                )),
            }
        };
        session.bounded("publishing a batch", publish).await
    }
}
