//! What the example's programs print and serve about themselves: logs, metrics, exit status.

/// Logs to standard error at info level (override with `RUST_LOG`).
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
}

/// Serves the worker's metrics (those of [`hermes::telemetry`]) in Prometheus' text format
/// at `http://<address>/metrics` when `HERMES_METRICS_LISTEN` names an address
/// (`127.0.0.1:9185`, say); does nothing otherwise. Call it inside the Tokio runtime.
///
/// # Errors
/// An address that does not parse, or a listener that cannot be installed.
pub fn init_metrics() -> Result<(), hermes::Error> {
    let Ok(address) = std::env::var("HERMES_METRICS_LISTEN") else {
        return Ok(());
    };
    let config = |message: String| hermes::Error::Config {
        driver: "metrics",
        message,
    };
    let address: std::net::SocketAddr = address
        .parse()
        .map_err(|e| config(format!("HERMES_METRICS_LISTEN {address:?}: {e}")))?;
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .with_http_listener(address)
        .install()
        .map_err(|e| config(format!("the metrics listener on {address}: {e}")))?;
    hermes::telemetry::describe();
    tracing::info!("metrics at http://{address}/metrics");
    Ok(())
}

/// Exit status of a worker: success, or failure with the error on standard error.
pub fn exit_status(result: Result<(), hermes::Error>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("worker failed: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
