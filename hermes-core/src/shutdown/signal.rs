use std::time::SystemTime;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::Shutdown;
use crate::Error;

/// Shutdown on SIGTERM or SIGINT (Ctrl-C), or when [`shutdown`](Shutdown::shutdown) is called
/// in this process.
///
/// The dispatcher is woken at once: it stops taking messages and lets running handlers finish
/// within its grace period.
#[derive(Debug, Clone)]
pub struct SignalShutdown {
    token: CancellationToken,
}

impl SignalShutdown {
    /// Starts listening for SIGTERM and SIGINT. Call it inside a Tokio runtime.
    ///
    /// # Errors
    /// [`Error::Io`] when the signal handlers cannot be installed.
    pub fn install() -> Result<Self, Error> {
        let token = CancellationToken::new();
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let install = |kind: SignalKind, name: &str| {
                signal(kind).map_err(|e| Error::io(format!("installing the {name} handler"), e))
            };
            let mut term = install(SignalKind::terminate(), "SIGTERM")?;
            let mut int = install(SignalKind::interrupt(), "SIGINT")?;
            let cancel = token.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = int.recv() => {},
                    () = cancel.cancelled() => return,
                }
                tracing::info!("shutdown signal received");
                cancel.cancel();
            });
        }
        #[cfg(not(unix))]
        {
            let cancel = token.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    cancel.cancel();
                }
            });
        }
        Ok(SignalShutdown { token })
    }
}

#[async_trait]
impl Shutdown for SignalShutdown {
    async fn should_shutdown(&self, _started: SystemTime) -> Result<bool, Error> {
        Ok(self.token.is_cancelled())
    }

    async fn shutdown(&self, at: Option<SystemTime>) -> Result<(), Error> {
        let delay = at
            .and_then(|at| at.duration_since(SystemTime::now()).ok())
            .unwrap_or_default();
        if delay.is_zero() {
            self.token.cancel();
        } else {
            let token = self.token.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                token.cancel();
            });
        }
        Ok(())
    }

    fn token(&self) -> Option<CancellationToken> {
        Some(self.token.clone())
    }
}
