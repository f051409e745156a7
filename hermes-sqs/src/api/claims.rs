//! The SQS calls on claimed messages, by their receipt handles: deleting them, and changing
//! their visibility.

use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry,
};
use hermes_core::Error;

use super::{QueueInfo, SQS_CALL_TIMEOUT, sdk_call, whole_seconds};
use crate::error::sdk_error;
use crate::{MAX_BATCH_SIZE, NAME};

/// Deletes a claimed message; one whose receipt is no longer valid is already gone or
/// claimed again.
pub(crate) async fn delete(client: &Client, queue: &QueueInfo, handle: &str) -> Result<(), Error> {
    let request = client
        .delete_message()
        .queue_url(&queue.url)
        .receipt_handle(handle)
        .send();
    match sdk_call("DeleteMessage", SQS_CALL_TIMEOUT, request).await? {
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

/// Deletes the claimed messages of `queue` with the receipt `handles`, ten per request.
/// Entries SQS refuses (their receipt expired) are left: they are gone or claimed again.
pub(crate) async fn delete_all(
    client: &Client,
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
        let request = client
            .delete_message_batch()
            .queue_url(&queue.url)
            .set_entries(Some(entries))
            .send();
        let answer = sdk_call("DeleteMessageBatch", SQS_CALL_TIMEOUT, request)
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

/// Makes a claimed message visible again `by` from now. `Ok(false)` when the claim is gone.
pub(crate) async fn change_visibility(
    client: &Client,
    queue: &QueueInfo,
    handle: &str,
    by: Duration,
) -> Result<bool, Error> {
    let request = client
        .change_message_visibility()
        .queue_url(&queue.url)
        .receipt_handle(handle)
        .visibility_timeout(whole_seconds(by))
        .send();
    match sdk_call("ChangeMessageVisibility", SQS_CALL_TIMEOUT, request).await? {
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

/// Makes the claimed messages of the queue at `url` with the receipt `handles` visible again
/// at once, ten per request; goes on past a failed request and returns its error.
pub(crate) async fn make_visible(
    client: &Client,
    url: &str,
    handles: &[String],
) -> Result<(), Error> {
    let mut first_error = None;
    for chunk in handles.chunks(MAX_BATCH_SIZE as usize) {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, handle)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(handle)
                    .visibility_timeout(0)
                    .build()
                    .map_err(|e| Error::driver(NAME, e.to_string(), false))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let request = client
            .change_message_visibility_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send();
        match sdk_call("ChangeMessageVisibilityBatch", SQS_CALL_TIMEOUT, request).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                first_error.get_or_insert(sdk_error("ChangeMessageVisibilityBatch", e));
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}
