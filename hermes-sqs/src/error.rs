//! SDK errors as Hermes errors.

use std::fmt;

use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use hermes_core::{BoxError, Error};

use crate::driver::NAME;

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

/// `error` of the SDK call `operation`: a lost connection or a timeout is a temporary
/// [`Error::Connection`]; a service error is an [`Error::Driver`], temporary when throttled or
/// when the service failed; a request that could not be built (no region, no HTTP client) or
/// that the client refused to send is an [`Error::Config`].
pub(crate) fn sdk_error<E, R>(operation: &'static str, error: SdkError<E, R>) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: fmt::Debug + Send + Sync + 'static,
{
    let message = format!("{operation}: {}", DisplayErrorContext(&error));
    match &error {
        SdkError::ServiceError(service) => {
            let code = service.err().code().unwrap_or_default();
            let temporary = TEMPORARY_CODES.contains(&code);
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
