//! A worker killed with SIGKILL in the middle of a handler: its claim expires after the
//! visibility timeout and another worker runs that export; every other export runs exactly
//! once and nothing is lost. Runs against the Redis at `HERMES_REDIS_URL`, with both clients.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use hermes_core::{DEFAULT_PRIORITY, Driver, Shutdown};
use hermes_example_common::testing::{
    assert_each_exported_once, crash_test_reports, exits_cleanly, exported, slow_export,
    start_worker, wait_until,
};
use hermes_example_redis::Settings;

const VISIBILITY_SECONDS: u64 = 2;

fn worker(dir: &Path, settings: &Settings) -> Child {
    start_worker(
        env!("CARGO_BIN_EXE_redis-worker"),
        dir,
        &[
            ("HERMES_REDIS_URL", &settings.url),
            ("HERMES_REDIS_KEY", &settings.key),
            ("HERMES_REDIS_CLIENT", &settings.client),
            ("HERMES_VISIBILITY_TIMEOUT", &VISIBILITY_SECONDS.to_string()),
        ],
    )
}

fn redis_cli(settings: &Settings, args: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .arg("-u")
        .arg(&settings.url)
        .args(args)
        .output()
        .expect("redis-cli is installed (the test command installs it)");
    String::from_utf8(output.stdout).unwrap()
}

async fn send(driver: &impl Driver, report: &str, seconds: u64) {
    driver
        .send(&slow_export(report, seconds), DEFAULT_PRIORITY)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_handler_loses_nothing() {
    for client in ["redis", "fred"] {
        let mut settings = Settings::from_env();
        settings.client = client.to_owned();
        settings.key = format!("crash-{client}-{}", std::process::id());
        settings.visibility_timeout = Some(Duration::from_secs(VISIBILITY_SECONDS));
        let dir = std::env::temp_dir().join(&settings.key);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let emitter = settings.driver().await.unwrap();
        let reports = crash_test_reports();
        let in_flight = format!("{}_in_flight", settings.key);

        // The first worker takes the slow export and is killed inside its handler.
        send(&emitter, "slow", 3).await;
        let mut first = worker(&dir, &settings);
        wait_until(
            "the slow export to be claimed",
            Duration::from_secs(30),
            || {
                redis_cli(&settings, &["ZRANGE", &in_flight, "0", "-1"])
                    .contains(r#""report":"slow""#)
            },
        );
        // The others arrive while it hangs there.
        for (report, seconds) in reports.iter().filter(|(r, _)| r != "slow") {
            send(&emitter, report, *seconds).await;
        }
        first.kill().unwrap(); // SIGKILL
        first.wait().unwrap();
        let killed_at = Instant::now();
        assert!(exported(&dir).is_empty(), "the slow export never finished");

        // The second worker runs the others at once and the slow one after its claim expires.
        let mut second = worker(&dir, &settings);
        let done = assert_each_exported_once(&dir, &reports, Duration::from_secs(60));
        assert!(
            done - killed_at + Duration::from_millis(100)
                >= Duration::from_secs(VISIBILITY_SECONDS),
            "{client}: the slow export ran again before its claim expired"
        );
        assert_eq!(redis_cli(&settings, &["ZCARD", &in_flight]).trim(), "0");

        settings.shutdown(&emitter).shutdown(None).await.unwrap();
        assert!(
            exits_cleanly(&mut second, Duration::from_secs(10)),
            "{client}: clean exit"
        );
        for suffix in ["", "_high", "_schedule", "_in_flight", "_shutdown"] {
            redis_cli(&settings, &["DEL", &format!("{}{suffix}", settings.key)]);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
