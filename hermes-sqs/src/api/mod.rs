//! The SQS calls themselves, on the SDK client: each bounded in time, on a queue as looked up
//! once ([`QueueInfo`]), and the client [`SqsDriver::from_url`](crate::SqsDriver::from_url)
//! builds.

use std::future::Future;
use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::QueueAttributeName;
use hermes_core::Error;
use hermes_core::driver::no_answer;

use crate::NAME;
use crate::error::sdk_error;

mod claims;
mod client;

pub(crate) use claims::{change_visibility, delete, delete_all, make_visible};
pub(crate) use client::connect;

/// The longest one call to SQS may take beyond its long poll: an endpoint that takes the
/// connection but does not answer fails the call with a temporary
/// [`Error::Connection`](hermes_core::Error::Connection) after this. Longer than
/// [`CALL_TIMEOUT`](hermes_core::driver::CALL_TIMEOUT): one call of the SDK may hold several
/// attempts (its standard retries, with a backoff between them).
pub(crate) const SQS_CALL_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Runs the SDK call `call` (the operation `operation`, for the error) for at most `limit`;
/// past that, fails with the temporary error of [`no_answer`], as
/// [`bounded`](hermes_core::driver::bounded) does. The call's own result is returned as it is,
/// for the caller to read SQS's answer, or its error, as it needs.
///
/// Not `bounded` itself: it takes a call whose error is already Hermes', and wrapping the
/// SDK's large futures in its further layers overflowed the stack of a worker thread in debug
/// builds (a poll that quarantines a message goes deep).
pub(crate) async fn sdk_call<T, E>(
    operation: &'static str,
    limit: Duration,
    call: impl Future<Output = Result<T, E>>,
) -> Result<Result<T, E>, Error> {
    tokio::time::timeout(limit, call)
        .await
        .map_err(|_| no_answer(NAME, operation, limit))
}

/// The approximate counts of the queue at `url`: visible, not visible (claimed), delayed.
pub(crate) async fn counts(client: &Client, url: &str) -> Result<[u64; 3], Error> {
    let names = [
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        QueueAttributeName::ApproximateNumberOfMessagesDelayed,
    ];
    let request = client
        .get_queue_attributes()
        .queue_url(url)
        .set_attribute_names(Some(names.to_vec()))
        .send();
    let answer = sdk_call("GetQueueAttributes", SQS_CALL_TIMEOUT, request)
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
