//! Sending: encoding, and `SendMessage` / `SendMessageBatch` requests (`route`, in
//! `delay.rs`, decides where a message due later waits).

use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use hermes_core::{Error, Message, Priority};

use crate::api::{QueueInfo, SQS_CALL_TIMEOUT, sdk_call};
use crate::core::Core;
use crate::{MAX_BATCH_SIZE, NAME};

impl Core {
    pub(crate) async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        let name = self.queues.get(priority)?;
        let body = self.encode(message)?;
        let queue = self.resolve(&name).await?;
        self.route(&queue, body, message.execute_at()).await
    }

    pub(crate) async fn send_batch(
        &self,
        messages: &[Message],
        priority: Priority,
    ) -> Result<(), Error> {
        if messages.is_empty() {
            return Ok(());
        }
        let name = self.queues.get(priority)?;
        // All encoded and checked first: a message SQS would refuse fails the batch before
        // anything is sent.
        let bodies = messages
            .iter()
            .map(|message| self.encode(message))
            .collect::<Result<Vec<_>, _>>()?;
        let queue = self.resolve(&name).await?;
        // Those due later than SQS can delay go to the delay queue one by one; the rest in
        // batches.
        let (long, now): (Vec<_>, Vec<_>) = messages
            .iter()
            .zip(bodies)
            .partition(|(message, _)| self.beyond_max_delay(message.execute_at()));
        for (message, body) in long {
            self.route(&queue, body, message.execute_at()).await?;
        }
        let (messages, bodies): (Vec<Message>, Vec<String>) =
            now.into_iter().map(|(m, b)| (m.clone(), b)).unzip();
        let mut start = 0;
        while start < messages.len() {
            let end = request_end(&bodies, start, self.options.max_payload);
            self.send_request(&queue, &messages[start..end], &bodies[start..end])
                .await?;
            start = end;
        }
        Ok(())
    }

    /// `message` as the text SQS stores.
    pub(crate) fn encode(&self, message: &Message) -> Result<String, Error> {
        message.check()?;
        let bytes = self.serializer.serialize(message)?;
        let max = self.options.max_payload;
        if bytes.len() > max {
            return Err(Error::PayloadTooLarge {
                driver: NAME,
                size: bytes.len(),
                max,
            });
        }
        String::from_utf8(bytes).map_err(|_| {
            Error::InvalidMessage(
                "SQS stores text, and the serializer produced bytes that are not UTF-8".to_owned(),
            )
        })
    }

    pub(crate) async fn send_body(
        &self,
        queue: &QueueInfo,
        body: String,
        delay_seconds: i32,
    ) -> Result<(), Error> {
        let mut request = self
            .client
            .send_message()
            .queue_url(&queue.url)
            .message_body(body);
        if delay_seconds > 0 {
            request = request.delay_seconds(delay_seconds);
        }
        sdk_call("SendMessage", SQS_CALL_TIMEOUT, request.send())
            .await?
            .map_err(|e| self.queue_error("SendMessage", &queue.name, e))?;
        Ok(())
    }

    /// One `SendMessageBatch` of `messages` (at most ten) with their encoded `bodies`, each
    /// with its own delay. An entry SQS does not report as sent is sent again alone, once; the
    /// error of that send is returned.
    async fn send_request(
        &self,
        queue: &QueueInfo,
        messages: &[Message],
        bodies: &[String],
    ) -> Result<(), Error> {
        let entries = messages
            .iter()
            .zip(bodies)
            .enumerate()
            .map(|(i, (message, body))| {
                let delay_seconds = self.delay_for(message);
                let mut entry = SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(body.clone());
                if delay_seconds > 0 {
                    entry = entry.delay_seconds(delay_seconds);
                }
                entry
                    .build()
                    .map_err(|e| Error::driver(NAME, e.to_string(), false))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let request = self
            .client
            .send_message_batch()
            .queue_url(&queue.url)
            .set_entries(Some(entries))
            .send();
        let output = sdk_call("SendMessageBatch", SQS_CALL_TIMEOUT, request)
            .await?
            .map_err(|e| self.queue_error("SendMessageBatch", &queue.name, e))?;
        for (i, (message, body)) in messages.iter().zip(bodies).enumerate() {
            let id = i.to_string();
            if output.successful().iter().any(|sent| sent.id() == id) {
                continue;
            }
            let reason = output
                .failed()
                .iter()
                .find(|failed| failed.id() == id)
                .map_or_else(
                    || "not reported".to_owned(),
                    |failed| {
                        format!(
                            "{}: {}",
                            failed.code(),
                            failed.message().unwrap_or_default()
                        )
                    },
                );
            tracing::warn!(
                queue = %queue.name,
                "SQS did not take message #{} of a batch ({reason}); sending it alone",
                message.id()
            );
            self.send_body(queue, body.clone(), self.delay_for(message))
                .await?;
        }
        Ok(())
    }
}

/// Where the `SendMessageBatch` request of `bodies` starting at `start` ends: at most ten
/// entries whose bodies together are at most `max_bytes` (always at least one entry).
fn request_end(bodies: &[String], start: usize, max_bytes: usize) -> usize {
    let mut end = start;
    let mut bytes = 0;
    while end < bodies.len() && end - start < MAX_BATCH_SIZE as usize {
        bytes += bodies[end].len();
        if end > start && bytes > max_bytes {
            break;
        }
        end += 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::request_end;

    /// The request boundaries of bodies of `sizes` bytes under `max` bytes per request.
    fn requests(sizes: &[usize], max: usize) -> Vec<usize> {
        let bodies: Vec<String> = sizes.iter().map(|n| "x".repeat(*n)).collect();
        let (mut start, mut lengths) = (0, Vec::new());
        while start < bodies.len() {
            let end = request_end(&bodies, start, max);
            lengths.push(end - start);
            start = end;
        }
        lengths
    }

    #[test]
    fn requests_take_ten_entries_and_max_bytes_at_most() {
        assert_eq!(requests(&[1; 23], 1000), [10, 10, 3]);
        assert_eq!(requests(&[1; 10], 1000), [10]);
        assert_eq!(requests(&[], 1000), Vec::<usize>::new());
        // By size: 40 + 40 + 20 fit 100, the next does not.
        assert_eq!(
            requests(&[40, 40, 20, 1, 100, 100, 99, 1], 100),
            [3, 1, 1, 1, 2]
        );
        // A body of the maximum size goes alone.
        assert_eq!(requests(&[1, 100, 1], 100), [1, 1, 1]);
    }
}
