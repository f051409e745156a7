//! Finding or creating the queues, and the SQS calls on one claimed message.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::types::QueueAttributeName;
use hermes_core::Error;

use crate::NAME;
use crate::driver::{SqsDriver, lock};
use crate::error::{COMMAND_TIMEOUT, bounded, sdk_error};

/// How long the quarantine keeps messages: 14 days, SQS's longest retention.
const QUARANTINE_RETENTION_SECONDS: &str = "1209600";

/// The visibility timeout of an SQS queue that does not say otherwise.
const SQS_DEFAULT_VISIBILITY: Duration = Duration::from_secs(30);

/// SQS's longest visibility timeout.
const MAX_VISIBILITY_SECONDS: f64 = 43_200.0;

/// A queue as looked up (or created) once: its name, URL and visibility timeout.
#[derive(Debug)]
pub(crate) struct QueueInfo {
    pub(crate) name: String,
    pub(crate) url: String,
    pub(crate) visibility: Duration,
}

/// `duration` as whole seconds for SQS, rounded up, at most 12 hours.
pub(crate) fn whole_seconds(duration: Duration) -> i32 {
    duration.as_secs_f64().ceil().min(MAX_VISIBILITY_SECONDS) as i32
}

impl SqsDriver {
    /// The queue called `name`, looked up, or created when it does not exist, once.
    pub(crate) async fn resolve(&self, name: &str) -> Result<Arc<QueueInfo>, Error> {
        let cell = lock(&self.inner.resolved)
            .entry(name.to_owned())
            .or_default()
            .clone();
        let info = cell.get_or_try_init(|| self.create_or_get(name)).await?;
        Ok(info.clone())
    }

    pub(crate) async fn create_or_get(&self, name: &str) -> Result<Arc<QueueInfo>, Error> {
        let client = &self.inner.client;
        let quarantine = name == self.inner.quarantine;
        let found = client.get_queue_url().queue_name(name).send();
        let url = match bounded("GetQueueUrl", COMMAND_TIMEOUT, found).await? {
            Ok(found) => found.queue_url,
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_queue_does_not_exist()) =>
            {
                let attributes = if quarantine {
                    self.quarantine_attributes()
                } else {
                    self.inner.options.queue_attributes.clone()
                };
                let create = client
                    .create_queue()
                    .queue_name(name)
                    .set_attributes((!attributes.is_empty()).then_some(attributes))
                    .send();
                bounded("CreateQueue", COMMAND_TIMEOUT, create)
                    .await?
                    .map_err(|e| sdk_error("CreateQueue", e))?
                    .queue_url
            }
            Err(e) => return Err(sdk_error("GetQueueUrl", e)),
        };
        let url = url.ok_or_else(|| {
            Error::driver(
                NAME,
                format!("SQS returned no URL for the queue {name}"),
                false,
            )
        })?;
        let visibility = match self.inner.options.visibility_timeout {
            Some(visibility) => visibility,
            None if quarantine => SQS_DEFAULT_VISIBILITY,
            None => {
                let request = client
                    .get_queue_attributes()
                    .queue_url(&url)
                    .attribute_names(QueueAttributeName::VisibilityTimeout)
                    .send();
                let attributes = bounded("GetQueueAttributes", COMMAND_TIMEOUT, request)
                    .await?
                    .map_err(|e| sdk_error("GetQueueAttributes", e))?;
                attributes
                    .attributes()
                    .and_then(|a| a.get(&QueueAttributeName::VisibilityTimeout))
                    .and_then(|v| v.parse().ok())
                    .map_or(SQS_DEFAULT_VISIBILITY, Duration::from_secs)
            }
        };
        Ok(Arc::new(QueueInfo {
            name: name.to_owned(),
            url,
            visibility,
        }))
    }

    /// The quarantine keeps messages as long as SQS allows, encrypted as the queues are.
    pub(crate) fn quarantine_attributes(&self) -> HashMap<QueueAttributeName, String> {
        let mut attributes: HashMap<_, _> = self
            .inner
            .options
            .queue_attributes
            .iter()
            .filter(|(name, _)| {
                matches!(
                    name,
                    QueueAttributeName::KmsMasterKeyId
                        | QueueAttributeName::KmsDataKeyReusePeriodSeconds
                        | QueueAttributeName::SqsManagedSseEnabled
                )
            })
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        attributes.insert(
            QueueAttributeName::MessageRetentionPeriod,
            QUARANTINE_RETENTION_SECONDS.to_owned(),
        );
        attributes
    }

    /// Deletes a claimed message; one whose receipt is no longer valid is already gone or
    /// claimed again.
    pub(crate) async fn delete(&self, queue: &QueueInfo, handle: &str) -> Result<(), Error> {
        let request = self
            .inner
            .client
            .delete_message()
            .queue_url(&queue.url)
            .receipt_handle(handle)
            .send();
        match bounded("DeleteMessage", COMMAND_TIMEOUT, request).await? {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_receipt_handle_is_invalid()) =>
            {
                tracing::warn!(
                    queue = %queue.name,
                    "A message was deleted after its receipt expired; it may be delivered again"
                );
                Ok(())
            }
            Err(e) => Err(sdk_error("DeleteMessage", e)),
        }
    }

    /// Makes a claimed message visible again `by` from now. `Ok(false)` when the claim is gone.
    pub(crate) async fn change_visibility(
        &self,
        queue: &QueueInfo,
        handle: &str,
        by: Duration,
    ) -> Result<bool, Error> {
        let request = self
            .inner
            .client
            .change_message_visibility()
            .queue_url(&queue.url)
            .receipt_handle(handle)
            .visibility_timeout(whole_seconds(by))
            .send();
        match bounded("ChangeMessageVisibility", COMMAND_TIMEOUT, request).await? {
            Ok(_) => Ok(true),
            Err(e)
                if e.as_service_error().is_some_and(|e| {
                    e.is_receipt_handle_is_invalid() || e.is_message_not_inflight()
                }) =>
            {
                Ok(false)
            }
            Err(e) => Err(sdk_error("ChangeMessageVisibility", e)),
        }
    }

    /// Moves an undecodable message to the quarantine: sent there first, then deleted here.
    pub(crate) async fn quarantine(
        &self,
        from: &QueueInfo,
        body: &str,
        handle: &str,
    ) -> Result<(), Error> {
        let quarantine = self.resolve(&self.inner.quarantine).await?;
        self.send_body(&quarantine, body.to_owned(), 0).await?;
        self.delete(from, handle).await?;
        tracing::warn!(
            queue = %from.name,
            quarantine = %quarantine.name,
            "Moved an undecodable message from {} to {}",
            from.name,
            quarantine.name
        );
        Ok(())
    }
}
