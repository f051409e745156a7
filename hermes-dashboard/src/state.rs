//! What every request handler shares, and the calls to the backend they make through it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use hermes_core::driver::{Browse, Controls, DeadLetters, Inspect};
use hermes_core::{Driver, Error};

use crate::base::Base;
use crate::html::{escape, page};
use crate::sampler::Sampler;

/// What every request handler shares.
pub(crate) struct State {
    pub(crate) driver: Arc<dyn Driver>,
    /// The token an action's POST must carry: the dashboard puts it in its own forms.
    pub(crate) token: String,
    pub(crate) read_only: bool,
    /// How long one call to the backend may take.
    pub(crate) timeout: Duration,
    /// The workers' counts and throughput since the dashboard started.
    pub(crate) sampler: Sampler,
    /// Set once the first request has started the sampling.
    pub(crate) sampling: tokio::sync::OnceCell<()>,
}

impl State {
    pub(crate) fn new(driver: Arc<dyn Driver>, read_only: bool, timeout: Duration) -> Self {
        State {
            driver,
            token: format!("{:032x}", rand::random::<u128>()),
            read_only,
            timeout,
            sampler: Sampler::new(hermes_core::time::unix_now()),
            sampling: tokio::sync::OnceCell::new(),
        }
    }

    /// Runs a backend call within the dashboard's timeout; an error is a page saying so.
    pub(crate) async fn call<T>(
        &self,
        base: &Base,
        work: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Response> {
        match tokio::time::timeout(self.timeout, work).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(failure(base, StatusCode::BAD_GATEWAY, &e.to_string())),
            Err(_) => Err(failure(
                base,
                StatusCode::GATEWAY_TIMEOUT,
                "the backend did not answer in time",
            )),
        }
    }

    /// The queues' figures.
    pub(crate) fn inspect(&self) -> Result<&dyn Inspect, Error> {
        self.driver
            .inspect()
            .ok_or_else(|| self.lacks("inspection"))
    }

    /// Reading messages without taking them, deleting one.
    pub(crate) fn browse(&self) -> Result<&dyn Browse, Error> {
        self.driver.browse().ok_or_else(|| self.lacks("peek"))
    }

    /// The job records and groups.
    pub(crate) fn jobs(&self) -> Result<&dyn hermes_core::driver::JobStore, Error> {
        self.driver
            .jobs()
            .ok_or_else(|| self.lacks("job records (the jobs facet)"))
    }

    /// The dead letters.
    pub(crate) fn dead_letters(&self) -> Result<&dyn DeadLetters, Error> {
        self.driver
            .dead_letters()
            .ok_or_else(|| self.lacks("dead letters"))
    }

    /// Pausing and cancelling; `what` names the action in the error of a backend without.
    pub(crate) fn controls(&self, what: &'static str) -> Result<&dyn Controls, Error> {
        self.driver.controls().ok_or_else(|| self.lacks(what))
    }

    fn lacks(&self, what: &'static str) -> Error {
        Error::Unsupported {
            driver: self.driver.name(),
            what,
        }
    }

    /// Whether `token` is the one this dashboard's forms carry, compared in constant time.
    pub(crate) fn carries_token(&self, token: &str) -> bool {
        crate::auth::same_secret(token.as_bytes(), self.token.as_bytes())
    }
}

/// A page saying what went wrong, with `status`.
pub(crate) fn failure(base: &Base, status: StatusCode, text: &str) -> Response {
    (
        status,
        Html(page(base, "Error", &format!("<p>{}</p>", escape(text)))),
    )
        .into_response()
}
