//! The router and its settings.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use hermes_core::Driver;

use crate::auth::{self, Credentials};
use crate::state::State;
use crate::{pages, prometheus, sampler};

/// The dashboard of `driver` with the default settings: actions served, a 10 s bound on each
/// backend call, no credentials asked (mount it behind your application's authentication).
/// The same as `Dashboard::new(driver).router()`.
pub fn router(driver: Arc<dyn Driver>) -> Router {
    Dashboard::new(driver).router()
}

/// The dashboard's settings, turned into a [`Router`] by [`Dashboard::router`].
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// use hermes_dashboard::{Credentials, Dashboard};
///
/// let driver = Arc::new(hermes_testkit::MemoryDriver::new());
/// let app = Dashboard::new(driver)
///     .read_only(true)
///     .timeout(Duration::from_secs(5))
///     .credentials(Credentials::token("a long random token"))
///     .router();
/// # let _: axum::Router = app;
/// ```
#[derive(Debug)]
pub struct Dashboard {
    driver: Arc<dyn Driver>,
    read_only: bool,
    timeout: Duration,
    credentials: Option<Credentials>,
}

impl Dashboard {
    /// The dashboard of `driver`: actions served, a 10 s bound on each backend call, no
    /// credentials asked.
    pub fn new(driver: Arc<dyn Driver>) -> Self {
        Dashboard {
            driver,
            read_only: false,
            timeout: Duration::from_secs(10),
            credentials: None,
        }
    }

    /// Whether to serve no action at all (nothing can be replayed or deleted); `false` by
    /// default.
    #[must_use]
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// How long one call to the backend may take before its page says it did not answer;
    /// 10 s by default.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Asks every request for these credentials; a request without them is answered 401. None
    /// by default.
    #[must_use]
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// The router serving the pages, the actions (unless read-only), `metrics` and the JSON
    /// API, at its root: serve it as is or nest it under a path of your application.
    ///
    /// The throughput figures count from the first request the router serves, which starts
    /// a task reading the live workers every few seconds on the runtime serving it; the task
    /// ends when the router is dropped.
    pub fn router(self) -> Router {
        let read_only = self.read_only;
        let state = Arc::new(State::new(self.driver, self.read_only, self.timeout));
        let mut app = Router::new()
            .route("/", get(pages::overview::page))
            .route("/queues", get(pages::queues::page))
            .route("/queue", get(pages::queue::page))
            .route("/job", get(pages::job::page))
            .route("/groups", get(pages::groups::page))
            .route("/cron", get(pages::cron::page))
            .route("/limits", get(pages::limits::page))
            .route("/types", get(pages::history::types))
            .route("/api/history", get(pages::history::api))
            .route("/dead", get(pages::dead::page))
            .route("/dead/show", get(pages::dead::letter))
            .route("/workers", get(pages::workers::page))
            .route("/metrics", get(prometheus::metrics))
            .route("/api/stats", get(pages::api::stats))
            .route("/api/overview", get(pages::overview::api))
            .route("/assets/overview.js", get(pages::assets::overview_script))
            .route("/assets/style.css", get(pages::assets::style))
            .route("/assets/actions.js", get(pages::assets::actions_script))
            .route("/assets/live.js", get(pages::assets::live_script));
        if !read_only {
            app = app
                .route("/dead/replay", post(pages::dead::replay))
                .route("/dead/delete", post(pages::dead::delete))
                .route("/jobs/delete", post(pages::actions::delete))
                .route("/jobs/run-now", post(pages::actions::run_now))
                .route("/jobs/cancel", post(pages::actions::cancel))
                .route("/jobs/replay", post(pages::actions::replay))
                .route("/cron/run", post(pages::cron::run))
                .route("/pause", post(pages::actions::pause))
                .route("/resume", post(pages::actions::resume));
        }
        let app = app.layer(axum::middleware::from_fn_with_state(
            state.clone(),
            sampler::start_sampling,
        ));
        let app = match self.credentials {
            Some(credentials) => app.layer(axum::middleware::from_fn_with_state(
                Arc::new(credentials),
                auth::require,
            )),
            None => app,
        };
        app.with_state(state)
    }
}
