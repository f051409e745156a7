//! Shutdown signals: the shared file and SIGTERM/SIGINT.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hermes_core::{Dispatcher, SharedFileShutdown, Shutdown, SignalShutdown};
use hermes_testkit::MemoryDriver;

fn temp_file(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hermes-shutdown-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("shutdown");
    let _ = std::fs::remove_file(&path);
    path
}

#[tokio::test]
async fn shared_file_compares_the_mtime_with_the_start_in_whole_seconds() {
    let shutdown = SharedFileShutdown::new(temp_file("mtime"));
    let started = SystemTime::now();
    assert!(
        !shutdown.should_shutdown(started).await.unwrap(),
        "no file, no shutdown"
    );

    shutdown
        .shutdown(Some(started - Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(
        !shutdown.should_shutdown(started).await.unwrap(),
        "touched before the start"
    );

    shutdown.shutdown(None).await.unwrap();
    assert!(
        shutdown.should_shutdown(started).await.unwrap(),
        "touched after the start"
    );

    shutdown
        .shutdown(Some(SystemTime::now() + Duration::from_secs(3600)))
        .await
        .unwrap();
    assert!(
        !shutdown.should_shutdown(started).await.unwrap(),
        "a future time is a schedule"
    );
    let later = started + Duration::from_secs(7200);
    assert!(!shutdown.should_shutdown(later).await.unwrap());
}

#[tokio::test]
async fn shared_file_in_a_missing_folder_is_a_clear_error() {
    let shutdown = SharedFileShutdown::new("/nonexistent-hermes-dir/shutdown");
    let err = shutdown.shutdown(None).await.unwrap_err().to_string();
    assert!(
        err.contains("creating /nonexistent-hermes-dir/shutdown"),
        "{err}"
    );
}

#[tokio::test]
async fn sigterm_stops_an_idle_dispatcher_at_once() {
    let signal = SignalShutdown::install().unwrap();
    let dispatcher = Dispatcher::from_arc(Arc::new(MemoryDriver::new())).with_shutdown(signal);
    tokio::spawn(async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let status = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    });
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), dispatcher.handle(&[]))
        .await
        .expect("SIGTERM stopped the dispatcher")
        .unwrap();
    // The poll wait is 1 s; the token wakes the loop before it ends.
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
}
