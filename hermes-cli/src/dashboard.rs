//! `hermes dashboard`: the dashboard of `hermes-dashboard`, served on its own until interrupted.
//!
//! It listens on loopback unless told otherwise; on any other address it asks for credentials
//! from the environment (a token, or a user and a password) and refuses to start without them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hermes_core::Driver;
use hermes_dashboard::{Credentials, Dashboard, PASSWORD_VARIABLE, TOKEN_VARIABLE, USER_VARIABLE};

use crate::Failure;

/// Serves the dashboard on `listen` until interrupted (SIGINT or SIGTERM), printing the address
/// it listens on first.
pub(crate) async fn serve(
    driver: Arc<dyn Driver>,
    listen: SocketAddr,
    read_only: bool,
    timeout: Duration,
) -> Result<(), Failure> {
    let credentials = Credentials::from_env().map_err(|e| Failure::usage(e.to_string()))?;
    if credentials.is_none() && !listen.ip().is_loopback() {
        return Err(Failure::usage(format!(
            "the dashboard listens on {listen}, off loopback, only with credentials: set \
             {TOKEN_VARIABLE}, or {USER_VARIABLE} and {PASSWORD_VARIABLE}"
        )));
    }
    let mut dashboard = Dashboard::new(driver).read_only(read_only).timeout(timeout);
    if let Some(credentials) = credentials {
        dashboard = dashboard.credentials(credentials);
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Failure::failed(format!("cannot listen on {listen}: {e}")))?;
    let address = listener
        .local_addr()
        .map_err(|e| Failure::failed(e.to_string()))?;
    println!("hermes dashboard on http://{address}/");
    let stop = hermes_core::SignalShutdown::install()?;
    let stopped = hermes_core::Shutdown::token(&stop).unwrap_or_default();
    axum::serve(listener, dashboard.router())
        .with_graceful_shutdown(async move { stopped.cancelled().await })
        .await
        .map_err(|e| Failure::failed(format!("the dashboard stopped: {e}")))
}
