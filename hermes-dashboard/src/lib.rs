//! The Hermes dashboard as an [axum] [`Router`](axum::Router): every queue's figures and jobs
//! by state (a page at a time from the backend, filtered and searched, each job's page, and
//! actions on a selection), the dead letters, the live workers and what they run, the history
//! per minute and per hour with each queue's latency, the job types' figures, the batches and
//! workflows with their progress, the cron entries (run now), the limits' use, and Prometheus text at `metrics`.
//! Mount it in your own application, under your own path and behind your own login, or run it
//! alone with `hermes dashboard`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::sync::Arc;
//!
//! use axum::Router;
//! use hermes_testkit::MemoryDriver;
//! # use tower::ServiceExt;
//!
//! let driver = Arc::new(MemoryDriver::new());
//! let app: Router = Router::new().nest("/hermes", hermes_dashboard::router(driver));
//! # let request = axum::http::Request::get("/hermes/queues").body(axum::body::Body::empty()).unwrap();
//! # let response = app.oneshot(request).await.unwrap();
//! # assert_eq!(response.status(), 200);
//! // axum::serve(listener, app).await
//! # }
//! ```
//!
//! Every page is computed from the driver on each request; a driver lacking a facet (dead
//! letters, live workers) shows that it lacks it. Each link and form names the path the router
//! was mounted under, so it works at the root as well as nested.
//!
//! # Actions and their safety
//!
//! Actions (replay, delete) are POSTs carrying a token the dashboard puts in its own pages, so
//! a form on another site cannot make a browser replay a queue. [`Dashboard::read_only`] serves
//! no action at all. [`Dashboard::credentials`] asks every request for a token or a user and
//! password (compared in constant time), for a dashboard served on its own; mounted in an
//! application, put it behind the application's own authentication instead.

mod auth;
mod base;
mod chart;
mod dashboard;
mod html;
mod pages;
mod posted;
mod prometheus;
mod sampler;
mod state;
pub mod view;

pub use auth::{Credentials, CredentialsError, PASSWORD_VARIABLE, TOKEN_VARIABLE, USER_VARIABLE};
pub use dashboard::{Dashboard, router};
