//! Delayed messages: `DelaySeconds` up to `max_delay`, and beyond it the delay queue
//! `<queue>-delay`, whose messages a worker sends on to their queue once no more than
//! `max_delay` is left.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use aws_sdk_sqs::types::MessageAttributeValue;
use hermes_core::time::unix_now;
use hermes_core::{Error, Message};
use tokio::time::Instant;

use crate::api::{QueueInfo, SQS_CALL_TIMEOUT, delete, sdk_call};
use crate::core::{Core, lock};
use crate::naming::{MAX_QUEUE_NAME_LEN, TARGET_ATTRIBUTE, validate_sqs_queue_name};
use crate::{MAX_BATCH_SIZE, NAME};

impl Core {
    /// The `DelaySeconds` for a message due at `at`: what is left, rounded up (never early), at
    /// most `max_delay`; 0 when it is due.
    fn delay_seconds(&self, at: f64) -> i32 {
        let left = at - unix_now();
        if left.is_nan() || left <= 0.0 {
            return 0;
        }
        left.ceil().min(self.options.max_delay.as_secs_f64()) as i32
    }

    /// Whether `at` is further ahead than [`SqsOptions::max_delay`](crate::SqsOptions).
    pub(crate) fn beyond_max_delay(&self, at: Option<f64>) -> bool {
        at.is_some_and(|at| at - unix_now() > self.options.max_delay.as_secs_f64())
    }

    /// The `DelaySeconds` `message` is sent with now.
    pub(crate) fn delay_for(&self, message: &Message) -> i32 {
        message.execute_at().map_or(0, |at| self.delay_seconds(at))
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
        if size > self.options.max_payload {
            return Err(Error::PayloadTooLarge {
                driver: NAME,
                size,
                max: self.options.max_payload,
            });
        }
        let max = self.options.max_delay.as_secs_f64();
        let hop = ((at - unix_now()) - max).ceil().clamp(1.0, max) as i32;
        let delay = self.resolve(&self.delay_queue).await?;
        let destination = MessageAttributeValue::builder()
            .data_type("String")
            .string_value(&target.name)
            .build()
            .map_err(|e| Error::driver(NAME, e.to_string(), false))?;
        let request = self
            .client
            .send_message()
            .queue_url(&delay.url)
            .message_body(body)
            .delay_seconds(hop)
            .message_attributes(TARGET_ATTRIBUTE, destination)
            .send();
        sdk_call("SendMessage", SQS_CALL_TIMEOUT, request)
            .await?
            .map_err(|e| self.queue_error("SendMessage", &delay.name, e))?;
        Ok(())
    }

    /// How often a worker looks at the delay queue: half of `max_delay` (so a message's last
    /// stretch is sent while at least that much of it is left), at most 30 s.
    fn forward_interval(&self) -> Duration {
        (self.options.max_delay / 2).min(Duration::from_secs(30))
    }

    /// Starts moving the messages of the delay queue on, in a task of its own, when the last
    /// look is `forward_interval` old and no move runs.
    pub(crate) fn forward_long_delays_if_due(self: &Arc<Self>) {
        {
            let mut next = lock(&self.next_forward);
            let now = Instant::now();
            if now < *next {
                return;
            }
            *next = now + self.forward_interval();
        }
        if self.forwarding.swap(true, Ordering::AcqRel) {
            return;
        }
        let core = self.clone();
        tokio::spawn(async move {
            if let Err(e) = core.forward_long_delays().await {
                tracing::warn!("Moving delayed messages on failed, trying again later - {e}");
            }
            core.forwarding.store(false, Ordering::Release);
        });
    }

    /// Sends what became visible in the delay queue on (to its queue, or back to the delay
    /// queue while more than `max_delay` is left), deleting each copy after it was sent; goes
    /// on while batches come back full (up to 1,000 of them).
    async fn forward_long_delays(&self) -> Result<(), Error> {
        let delay = self.resolve(&self.delay_queue).await?;
        for _ in 0..1_000 {
            let request = self
                .client
                .receive_message()
                .queue_url(&delay.url)
                .max_number_of_messages(MAX_BATCH_SIZE)
                .wait_time_seconds(0)
                .message_attribute_names(TARGET_ATTRIBUTE)
                .send();
            let received = sdk_call("ReceiveMessage", SQS_CALL_TIMEOUT, request)
                .await?
                .map_err(|e| self.queue_error("ReceiveMessage", &delay.name, e))?;
            let messages = received.messages.unwrap_or_default();
            let full = messages.len() >= MAX_BATCH_SIZE as usize;
            for message in messages {
                let target = message
                    .message_attributes()
                    .and_then(|a| a.get(TARGET_ATTRIBUTE))
                    .and_then(|v| v.string_value())
                    .filter(|name| validate_sqs_queue_name(name, MAX_QUEUE_NAME_LEN).is_ok())
                    .unwrap_or(&self.queue)
                    .to_owned();
                let (Some(body), Some(handle)) = (message.body, message.receipt_handle) else {
                    continue;
                };
                match self.serializer.deserialize(body.as_bytes()) {
                    Ok(decoded) => {
                        let target = self.resolve(&target).await?;
                        self.route(&target, body, decoded.execute_at()).await?;
                        delete(&self.client, &delay, &handle).await?;
                    }
                    Err(source) => {
                        self.quarantine(&delay, &target, &body, &handle, &source)
                            .await?;
                        tracing::error!("Skipping undecodable message - {source}");
                    }
                }
            }
            if !full {
                return Ok(());
            }
        }
        Ok(())
    }
}
