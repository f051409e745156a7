//! The SDK client [`SqsDriver::from_url`](crate::SqsDriver::from_url) builds for itself.

use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::Region;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use hermes_core::Error;

use crate::NAME;

/// How long the client tries to open a connection before the call fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The SDK client for the server at `endpoint` (default AWS's for the region) in `region`:
/// the AWS default chains for credentials (and the region, when none is given), an HTTPS
/// client on rustls that also speaks plain HTTP, and a connect timeout of
/// [`CONNECT_TIMEOUT`].
pub(crate) async fn connect(endpoint: Option<&str>, region: Option<&str>) -> Result<Client, Error> {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .http_client(http)
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .build(),
        );
    if let Some(region) = region {
        loader = loader.region(Region::new(region.to_owned()));
    }
    if let Some(endpoint) = endpoint {
        loader = loader.endpoint_url(endpoint);
    }
    let config = loader.load().await;
    if config.region().is_none() {
        return Err(Error::Config {
            driver: NAME,
            message: "no AWS region: add region=<name> to the sqs:// URL or set AWS_REGION"
                .to_owned(),
        });
    }
    Ok(Client::new(&config))
}
