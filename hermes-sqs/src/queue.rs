//! Finding or creating the queues, their approximate counts, and the SQS calls on claimed
//! messages.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, QueueAttributeName};
use hermes_core::Error;

use crate::driver::{SqsDriver, lock};
use crate::error::{COMMAND_TIMEOUT, bounded, queue_gone, sdk_error};
use crate::{MAX_BATCH_SIZE, NAME};

/// SQS's longest message retention: 14 days.
const MAX_RETENTION: Duration = Duration::from_secs(14 * 24 * 3600);

/// SQS's shortest message retention.
const MIN_RETENTION: Duration = Duration::from_secs(60);

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
    /// `error` of the SDK call `operation` on the queue called `name`, as [`sdk_error`] makes
    /// it; when it says the queue is gone, the driver forgets the queue, so that the next call
    /// looks it up, or creates it, again.
    pub(crate) fn queue_error<E, R>(
        &self,
        operation: &'static str,
        name: &str,
        error: SdkError<E, R>,
    ) -> Error
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug + Send + Sync + 'static,
    {
        if queue_gone(&error) {
            lock(&self.inner.resolved).remove(name);
        }
        sdk_error(operation, error)
    }

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
            Ok(found) if quarantine => {
                if let Some(url) = &found.queue_url {
                    self.keep_retention(url).await;
                }
                found.queue_url
            }
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

    /// The quarantine's `MessageRetentionPeriod`: [`Retention::max_age`](hermes_core::inspect::Retention)
    /// within what SQS allows (60 s to 14 days), in whole seconds.
    pub(crate) fn store_retention_seconds(&self) -> u64 {
        let age = self.inner.options.retention.max_age;
        age.clamp(MIN_RETENTION, MAX_RETENTION).as_secs()
    }

    /// Raises the retention of the existing quarantine at `url` to the driver's when it is
    /// shorter (never lowers it: SQS would delete the older letters at once); a failure (no permission to change queue attributes, say) is logged and leaves the
    /// queue's own.
    async fn keep_retention(&self, url: &str) {
        let wanted = self.store_retention_seconds().to_string();
        let client = &self.inner.client;
        let request = client
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::MessageRetentionPeriod)
            .send();
        let current = match bounded("GetQueueAttributes", COMMAND_TIMEOUT, request).await {
            Ok(Ok(answer)) => answer
                .attributes()
                .and_then(|a| a.get(&QueueAttributeName::MessageRetentionPeriod))
                .cloned(),
            Ok(Err(e)) => {
                tracing::warn!("{}", sdk_error("GetQueueAttributes", e));
                return;
            }
            Err(e) => {
                tracing::warn!("{e}");
                return;
            }
        };
        // Lowering the period would make SQS delete older letters: only ever raise it.
        let current = current.and_then(|c| c.parse::<u64>().ok());
        if current.is_some_and(|c| c >= self.store_retention_seconds()) {
            return;
        }
        let request = client
            .set_queue_attributes()
            .queue_url(url)
            .attributes(QueueAttributeName::MessageRetentionPeriod, &wanted)
            .send();
        match bounded("SetQueueAttributes", COMMAND_TIMEOUT, request).await {
            Ok(Ok(_)) => tracing::info!(
                quarantine = %self.inner.quarantine,
                "Set the dead letters' retention to {wanted} s"
            ),
            Ok(Err(e)) => tracing::warn!(
                "Keeping the dead letters' retention of the queue - {}",
                sdk_error("SetQueueAttributes", e)
            ),
            Err(e) => tracing::warn!("Keeping the dead letters' retention of the queue - {e}"),
        }
    }

    /// The URL of the queue called `name` when it exists, without creating it.
    pub(crate) async fn existing(&self, name: &str) -> Result<Option<String>, Error> {
        let cell = lock(&self.inner.resolved).get(name).cloned();
        if let Some(info) = cell.as_ref().and_then(|cell| cell.get()) {
            return Ok(Some(info.url.clone()));
        }
        let request = self.inner.client.get_queue_url().queue_name(name).send();
        match bounded("GetQueueUrl", COMMAND_TIMEOUT, request).await? {
            Ok(found) => Ok(found.queue_url),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_queue_does_not_exist()) =>
            {
                Ok(None)
            }
            Err(e) => Err(sdk_error("GetQueueUrl", e)),
        }
    }

    /// The approximate counts of the queue at `url`: visible, not visible (claimed), delayed.
    pub(crate) async fn counts(&self, url: &str) -> Result<[u64; 3], Error> {
        let names = [
            QueueAttributeName::ApproximateNumberOfMessages,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
            QueueAttributeName::ApproximateNumberOfMessagesDelayed,
        ];
        let request = self
            .inner
            .client
            .get_queue_attributes()
            .queue_url(url)
            .set_attribute_names(Some(names.to_vec()))
            .send();
        let answer = bounded("GetQueueAttributes", COMMAND_TIMEOUT, request)
            .await?
            .map_err(|e| sdk_error("GetQueueAttributes", e))?;
        let attributes = answer.attributes();
        Ok(names.map(|name| {
            attributes
                .and_then(|a| a.get(&name))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        }))
    }

    /// Deletes the claimed messages of `queue` with the receipt `handles`, ten per request.
    /// Entries SQS refuses (their receipt expired) are left: they are gone or claimed again.
    pub(crate) async fn delete_all(
        &self,
        queue: &QueueInfo,
        handles: &[String],
    ) -> Result<(), Error> {
        for chunk in handles.chunks(MAX_BATCH_SIZE as usize) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, handle)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(handle)
                        .build()
                        .map_err(|e| Error::driver(NAME, e.to_string(), false))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let request = self
                .inner
                .client
                .delete_message_batch()
                .queue_url(&queue.url)
                .set_entries(Some(entries))
                .send();
            let answer = bounded("DeleteMessageBatch", COMMAND_TIMEOUT, request)
                .await?
                .map_err(|e| sdk_error("DeleteMessageBatch", e))?;
            if !answer.failed().is_empty() {
                tracing::warn!(
                    queue = %queue.name,
                    "SQS did not delete {} messages whose receipts expired",
                    answer.failed().len()
                );
            }
        }
        Ok(())
    }

    /// The quarantine keeps messages as long as the retention says and SQS allows, encrypted
    /// as the queues are.
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
            self.store_retention_seconds().to_string(),
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
}
