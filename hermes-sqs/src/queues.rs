//! Finding or creating the queues, once each: their URL and visibility timeout, the
//! attributes of the dead-letter queue, and forgetting a queue that was deleted.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::types::QueueAttributeName;
use hermes_core::Error;

use crate::NAME;
use crate::api::{QueueInfo, SQS_CALL_TIMEOUT, sdk_call};
use crate::core::{Core, lock};
use crate::error::{queue_gone, sdk_error};

/// SQS's longest message retention: 14 days.
const MAX_RETENTION: Duration = Duration::from_secs(14 * 24 * 3600);

/// SQS's shortest message retention.
const MIN_RETENTION: Duration = Duration::from_secs(60);

/// The visibility timeout of an SQS queue that does not say otherwise.
const SQS_DEFAULT_VISIBILITY: Duration = Duration::from_secs(30);

impl Core {
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
            lock(&self.resolved).remove(name);
        }
        sdk_error(operation, error)
    }

    /// The queue called `name`, looked up, or created when it does not exist, once.
    pub(crate) async fn resolve(&self, name: &str) -> Result<Arc<QueueInfo>, Error> {
        let cell = lock(&self.resolved)
            .entry(name.to_owned())
            .or_default()
            .clone();
        let info = cell.get_or_try_init(|| self.create_or_get(name)).await?;
        Ok(info.clone())
    }

    async fn create_or_get(&self, name: &str) -> Result<Arc<QueueInfo>, Error> {
        let client = &self.client;
        let quarantine = name == self.quarantine;
        let found = client.get_queue_url().queue_name(name).send();
        let url = match sdk_call("GetQueueUrl", SQS_CALL_TIMEOUT, found).await? {
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
                    self.options.queue_attributes.clone()
                };
                let create = client
                    .create_queue()
                    .queue_name(name)
                    .set_attributes((!attributes.is_empty()).then_some(attributes))
                    .send();
                sdk_call("CreateQueue", SQS_CALL_TIMEOUT, create)
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
        let visibility = match self.options.visibility_timeout {
            Some(visibility) => visibility,
            None if quarantine => SQS_DEFAULT_VISIBILITY,
            None => {
                let request = client
                    .get_queue_attributes()
                    .queue_url(&url)
                    .attribute_names(QueueAttributeName::VisibilityTimeout)
                    .send();
                let attributes = sdk_call("GetQueueAttributes", SQS_CALL_TIMEOUT, request)
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

    /// The quarantine's `MessageRetentionPeriod`:
    /// [`Retention::max_age`](hermes_core::inspect::Retention) within what SQS allows (60 s to
    /// 14 days), in whole seconds.
    fn store_retention_seconds(&self) -> u64 {
        let age = self.options.retention.max_age;
        age.clamp(MIN_RETENTION, MAX_RETENTION).as_secs()
    }

    /// Raises the retention of the existing quarantine at `url` to the driver's when it is
    /// shorter (never lowers it: SQS would delete the older letters at once); a failure (no
    /// permission to change queue attributes, say) is logged and leaves the queue's own.
    async fn keep_retention(&self, url: &str) {
        let wanted = self.store_retention_seconds().to_string();
        let client = &self.client;
        let request = client
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::MessageRetentionPeriod)
            .send();
        let current = match sdk_call("GetQueueAttributes", SQS_CALL_TIMEOUT, request).await {
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
        match sdk_call("SetQueueAttributes", SQS_CALL_TIMEOUT, request).await {
            Ok(Ok(_)) => tracing::info!(
                quarantine = %self.quarantine,
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
        let cell = lock(&self.resolved).get(name).cloned();
        if let Some(info) = cell.as_ref().and_then(|cell| cell.get()) {
            return Ok(Some(info.url.clone()));
        }
        let request = self.client.get_queue_url().queue_name(name).send();
        match sdk_call("GetQueueUrl", SQS_CALL_TIMEOUT, request).await? {
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

    /// The quarantine keeps messages as long as the retention says and SQS allows, encrypted
    /// as the queues are.
    fn quarantine_attributes(&self) -> HashMap<QueueAttributeName, String> {
        let mut attributes: HashMap<_, _> = self
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
}
