//! A worker killed with SIGKILL in the middle of a handler: its claim expires after the
//! visibility timeout and another worker runs that export; every other export runs exactly
//! once and nothing is lost. Runs against the Redis at `HERMES_REDIS_URL`, with both clients.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hermes_core::{DEFAULT_PRIORITY, Driver, Message, Shutdown};
use hermes_example_common::testing::{crash_test_reports, exits_cleanly, exported, wait_until};
use hermes_example_redis::{EXPORT, Settings};

const VISIBILITY_SECONDS: u64 = 2;

fn worker(dir: &Path, settings: &Settings) -> Child {
    Command::new(env!("CARGO_BIN_EXE_redis-worker"))
        .env("HERMES_DIR", dir)
        .env("HERMES_REDIS_URL", &settings.url)
        .env("HERMES_REDIS_KEY", &settings.key)
        .env("HERMES_REDIS_CLIENT", &settings.client)
        .env("HERMES_VISIBILITY_TIMEOUT", VISIBILITY_SECONDS.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the worker")
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
    let m = Message::builder(EXPORT)
        .payload(&serde_json::json!({ "report": report, "seconds": seconds }))
        .build()
        .unwrap();
    driver.send(&m, DEFAULT_PRIORITY).await.unwrap();
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
        wait_until("every export", Duration::from_secs(60), || {
            exported(&dir).len() >= 21
        });
        assert!(
            killed_at.elapsed() + Duration::from_millis(100)
                >= Duration::from_secs(VISIBILITY_SECONDS)
        );
        std::thread::sleep(Duration::from_millis(500));

        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for report in exported(&dir) {
            *counts.entry(report).or_default() += 1;
        }
        let expected: BTreeMap<String, usize> =
            reports.iter().map(|(r, _)| (r.clone(), 1)).collect();
        assert_eq!(counts, expected, "{client}: every export exactly once");
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
