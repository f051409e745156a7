//! SDK errors as Hermes errors.

use std::fmt;

use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use hermes_core::{BoxError, Error};

use crate::NAME;

/// The SDK's error with the text of its whole chain (the SDK's own `Display` says only
/// "service error" or "dispatch failure").
#[derive(Debug)]
struct ClientError {
    message: String,
    source: BoxError,
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

/// The text of `error` and of each error beneath it, joined with ": ". (The SDK's own context
/// display adds the whole `Debug` form too, long and saying nothing more.)
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(inner) = next {
        let part = inner.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        next = inner.source();
    }
    text
}

/// Service error codes that go away by themselves.
const TEMPORARY_CODES: [&str; 8] = [
    "RequestThrottled",
    "AWS.SimpleQueueService.RequestThrottled",
    "ThrottlingException",
    "Throttling",
    "KmsThrottled",
    "ServiceUnavailable",
    "InternalError",
    "InternalFailure",
];

/// Service error codes of a queue that does not exist (any more), or that was deleted so
/// recently that it cannot be created again yet.
const GONE_CODES: [&str; 4] = [
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
    "AWS.SimpleQueueService.QueueDeletedRecently",
    "QueueDeletedRecently",
];

/// Whether `error` says that the queue it was sent to does not exist (any more).
pub(crate) fn queue_gone<E, R>(error: &SdkError<E, R>) -> bool
where
    E: ProvideErrorMetadata,
{
    error
        .as_service_error()
        .and_then(ProvideErrorMetadata::code)
        .is_some_and(|code| GONE_CODES.contains(&code))
}

/// `error` of the SDK call `operation`: a lost connection or a timeout is a temporary
/// [`Error::Connection`]; a service error is an [`Error::Driver`], temporary when throttled,
/// when the service failed, or when the queue is gone (deleted while the driver ran: the next
/// call looks it up, or creates it, again); a request that could not be built (no region, no HTTP client) or
/// that the client refused to send is an [`Error::Config`].
pub(crate) fn sdk_error<E, R>(operation: &'static str, error: SdkError<E, R>) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: fmt::Debug + Send + Sync + 'static,
{
    let message = format!("{operation}: {}", chain(&error));
    match &error {
        SdkError::ServiceError(service) => {
            let code = service.err().code().unwrap_or_default();
            let temporary = TEMPORARY_CODES.contains(&code) || GONE_CODES.contains(&code);
            Error::Driver {
                driver: NAME,
                message,
                temporary,
                source: Some(Box::new(error)),
            }
        }
        SdkError::DispatchFailure(failure) if failure.is_user() => Error::Config {
            driver: NAME,
            message,
        },
        SdkError::ConstructionFailure(_) => Error::Config {
            driver: NAME,
            message: format!(
                "{message} (the SQS client needs a region, credentials and an HTTP client)"
            ),
        },
        _ => Error::connection(
            NAME,
            ClientError {
                message,
                source: Box::new(error),
            },
        ),
    }
}
