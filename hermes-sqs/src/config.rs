//! Options of the SQS driver.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_sqs::types::QueueAttributeName;
use hermes_core::Error;
use hermes_core::inspect::Retention;

use crate::NAME;

/// SQS's longest long poll (`WaitTimeSeconds`).
pub const MAX_WAIT_TIME: Duration = Duration::from_secs(20);

/// SQS's longest per-message delay (`DelaySeconds`).
pub const MAX_DELAY: Duration = Duration::from_secs(900);

/// SQS's largest batch of one `ReceiveMessage` (`MaxNumberOfMessages`).
pub const MAX_BATCH_SIZE: i32 = 10;

/// Options of an [`SqsDriver`](crate::SqsDriver). Start from [`SqsOptions::default`] and
/// change fields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqsOptions {
    /// The attributes of the queues the driver creates (the default queue and the priority
    /// queues), as Hermes' `$queueAttributes`: `VisibilityTimeout`, `MessageRetentionPeriod`,
    /// `KmsMasterKeyId`, … A queue that already exists keeps its own attributes. Default none.
    pub queue_attributes: HashMap<QueueAttributeName, String>,
    /// The longest single long poll of a `receive` (SQS `WaitTimeSeconds`, whole seconds, 1 to
    /// 20 s). A `receive` waiting longer polls again. Default 1 s, as in Hermes.
    pub wait_time: Duration,
    /// The visibility timeout asked for with every `ReceiveMessage`, in whole seconds. `None`
    /// (the default) keeps the queue's own `VisibilityTimeout` attribute, read once per queue.
    pub visibility_timeout: Option<Duration>,
    /// How many messages one `ReceiveMessage` takes at most (1 to 10). The extra ones wait in
    /// this process, claimed, until a `receive` asks; `flush` gives them back. Default 10.
    pub batch_size: i32,
    /// The longest `DelaySeconds` the driver asks for. A message due later waits in the delay
    /// queue `<queue>-delay` (only Hermes for Rust reads it) and is sent on to its queue when
    /// no more than this is left. At most 900 s (SQS's limit), the default.
    pub max_delay: Duration,
    /// The largest encoded message `send` accepts, in bytes; larger ones fail with
    /// [`Error::PayloadTooLarge`]. Default 262,144 (256 KiB, the smallest limit SQS queues have).
    pub max_payload: usize,
    /// How many dead letters the dead-letter queue `<queue>-quarantine` keeps, and for how
    /// long. SQS caps both ways only roughly: the age becomes the queue's
    /// `MessageRetentionPeriod`, which SQS bounds to 60 s .. 14 days, so the default 180 days
    /// keeps letters 14 days; the count is checked against SQS's approximate count after each
    /// dead letter, and the oldest of the letters one receive sees are dropped (see
    /// [`SqsDriver`](crate::SqsDriver)). Default [`Retention::default`] (10,000, 180 days).
    pub retention: Retention,
}

impl Default for SqsOptions {
    fn default() -> Self {
        SqsOptions {
            queue_attributes: HashMap::new(),
            wait_time: Duration::from_secs(1),
            visibility_timeout: None,
            batch_size: MAX_BATCH_SIZE,
            max_delay: MAX_DELAY,
            max_payload: 256 * 1024,
            retention: Retention::default(),
        }
    }
}

impl SqsOptions {
    /// Checks the options against SQS's limits.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        let problem = if self.wait_time > MAX_WAIT_TIME || self.wait_time < Duration::from_secs(1) {
            Some(format!(
                "wait_time is {:?}; SQS long polls last 1 to 20 s",
                self.wait_time
            ))
        } else if !(1..=MAX_BATCH_SIZE).contains(&self.batch_size) {
            Some(format!(
                "batch_size is {}; SQS receives 1 to 10 messages at once",
                self.batch_size
            ))
        } else if self.max_delay > MAX_DELAY || self.max_delay < Duration::from_secs(1) {
            Some(format!(
                "max_delay is {:?}; SQS delays messages by 1 to 900 s",
                self.max_delay
            ))
        } else if self
            .visibility_timeout
            .is_some_and(|v| v > Duration::from_secs(43_200))
        {
            Some("visibility_timeout is over SQS's limit of 12 hours".to_owned())
        } else if self.max_payload == 0 {
            Some("max_payload is 0".to_owned())
        } else if self.retention.max_count == 0 {
            Some("retention.max_count is 0; the dead-letter queue keeps at least one".to_owned())
        } else {
            None
        };
        match problem {
            Some(message) => Err(Error::Config {
                driver: NAME,
                message,
            }),
            None => Ok(()),
        }
    }
}
