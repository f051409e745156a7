//! A worker killed with SIGKILL in the middle of a handler: after the visibility timeout another
//! worker runs that export; every other export runs exactly once and nothing is lost.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use hermes_core::{DEFAULT_PRIORITY, Driver, SharedFileShutdown, Shutdown};
use hermes_example_common::testing::{
    assert_each_exported_once, crash_test_reports, exits_cleanly, exported, slow_export,
    start_worker, wait_until,
};
use hermes_example_filesystem::{driver, shutdown_file};

const VISIBILITY_SECONDS: &str = "2";

fn worker(dir: &Path) -> Child {
    start_worker(
        env!("CARGO_BIN_EXE_filesystem-worker"),
        dir,
        &[("HERMES_VISIBILITY_TIMEOUT", VISIBILITY_SECONDS)],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_handler_loses_nothing() {
    let dir = std::env::temp_dir().join(format!("hermes-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    let emitter = driver(&dir).unwrap();
    let reports = crash_test_reports();
    for (report, seconds) in &reports {
        emitter
            .send(&slow_export(report, *seconds), DEFAULT_PRIORITY)
            .await
            .unwrap();
    }

    // The first worker runs ten exports, then takes the slow one and is killed in its handler.
    let mut first = worker(&dir);
    let processing = dir.join("exports/processing");
    wait_until(
        "the slow export to be claimed",
        Duration::from_secs(30),
        || {
            exported(&dir).len() == 10
                && std::fs::read_dir(&processing).is_ok_and(|d| d.count() == 1)
        },
    );
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    let killed_at = Instant::now();
    let names: Vec<String> = reports.iter().map(|(r, _)| r.clone()).collect();
    assert_eq!(
        exported(&dir),
        names[..10],
        "the slow export never finished"
    );

    // The second worker runs the rest at once, and the slow one after the visibility timeout.
    let mut second = worker(&dir);
    let done = assert_each_exported_once(&dir, &reports, Duration::from_secs(60));
    assert!(done - killed_at >= Duration::from_secs(2));
    assert_eq!(std::fs::read_dir(&processing).unwrap().count(), 0);
    assert_eq!(
        std::fs::read_dir(dir.join("exports/new")).unwrap().count(),
        0
    );

    SharedFileShutdown::new(shutdown_file(&dir))
        .shutdown(None)
        .await
        .unwrap();
    assert!(exits_cleanly(&mut second, Duration::from_secs(10)));
    let _ = std::fs::remove_dir_all(&dir);
}
