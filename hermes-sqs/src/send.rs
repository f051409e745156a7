//! Sending: encoding, delays, and `SendMessage` / `SendMessageBatch` requests.

use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use hermes_core::time::unix_now;
use hermes_core::{Error, Message};

use crate::driver::SqsDriver;
use crate::error::{COMMAND_TIMEOUT, bounded};
use crate::naming::TARGET_ATTRIBUTE;
use crate::queue::QueueInfo;
use crate::{MAX_BATCH_SIZE, NAME};

impl SqsDriver {
    /// `message` as the text SQS stores.
    pub(crate) fn encode(&self, message: &Message) -> Result<String, Error> {
        message.check()?;
        let bytes = self.inner.serializer.serialize(message)?;
        let max = self.inner.options.max_payload;
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

    /// The `DelaySeconds` for a message due at `at`: what is left, rounded up (never early), at
    /// most `max_delay`; 0 when it is due.
    pub(crate) fn delay_seconds(&self, at: f64) -> i32 {
        let left = at - unix_now();
        if left.is_nan() || left <= 0.0 {
            return 0;
        }
        left.ceil().min(self.inner.options.max_delay.as_secs_f64()) as i32
    }

    /// Whether `at` is further ahead than [`SqsOptions::max_delay`](crate::SqsOptions).
    pub(crate) fn beyond_max_delay(&self, at: Option<f64>) -> bool {
        at.is_some_and(|at| at - unix_now() > self.inner.options.max_delay.as_secs_f64())
    }

    /// Sends `body`, due at `at`, on its way to `target`: there, with `DelaySeconds`, when no
    /// more than `max_delay` is left; else to the delay queue, to come back when exactly
    /// `max_delay` is left (or after `max_delay`, whichever is sooner).
    pub(crate) async fn route(
        &self,
        target: &QueueInfo,
        body: String,
        at: Option<f64>,
    ) -> Result<(), Error> {
        let Some(at) = at.filter(|_| self.beyond_max_delay(at)) else {
            let delay_seconds = at.map_or(0, |at| self.delay_seconds(at));
            return self.send_body(target, body, delay_seconds).await;
        };
        // SQS counts the attribute (name, type and value) in the message's size.
        let size = body.len() + TARGET_ATTRIBUTE.len() + "String".len() + target.name.len();
        if size > self.inner.options.max_payload {
            return Err(Error::PayloadTooLarge {
                driver: NAME,
                size,
                max: self.inner.options.max_payload,
            });
        }
        let max = self.inner.options.max_delay.as_secs_f64();
        let hop = ((at - unix_now()) - max).ceil().clamp(1.0, max) as i32;
        let delay = self.resolve(&self.inner.delay_queue).await?;
        let destination = MessageAttributeValue::builder()
            .data_type("String")
            .string_value(&target.name)
            .build()
            .map_err(|e| Error::driver(NAME, e.to_string(), false))?;
        let request = self
            .inner
            .client
            .send_message()
            .queue_url(&delay.url)
            .message_body(body)
            .delay_seconds(hop)
            .message_attributes(TARGET_ATTRIBUTE, destination)
            .send();
        bounded("SendMessage", COMMAND_TIMEOUT, request)
            .await?
            .map_err(|e| self.queue_error("SendMessage", &delay.name, e))?;
        Ok(())
    }

    /// The `DelaySeconds` `message` is sent with now.
    pub(crate) fn delay_for(&self, message: &Message) -> i32 {
        message.execute_at().map_or(0, |at| self.delay_seconds(at))
    }

    pub(crate) async fn send_body(
        &self,
        queue: &QueueInfo,
        body: String,
        delay_seconds: i32,
    ) -> Result<(), Error> {
        let mut request = self
            .inner
            .client
            .send_message()
            .queue_url(&queue.url)
            .message_body(body);
        if delay_seconds > 0 {
            request = request.delay_seconds(delay_seconds);
        }
        bounded("SendMessage", COMMAND_TIMEOUT, request.send())
            .await?
            .map_err(|e| self.queue_error("SendMessage", &queue.name, e))?;
        Ok(())
    }

    /// One `SendMessageBatch` of `messages` (at most ten) with their encoded `bodies`, each
    /// with its own delay. An entry SQS does not report as sent is sent again alone, once; the
    /// error of that send is returned.
    pub(crate) async fn send_request(
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
            .inner
            .client
            .send_message_batch()
            .queue_url(&queue.url)
            .set_entries(Some(entries))
            .send();
        let output = bounded("SendMessageBatch", COMMAND_TIMEOUT, request)
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
pub(crate) fn request_end(bodies: &[String], start: usize, max_bytes: usize) -> usize {
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
