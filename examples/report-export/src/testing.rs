//! Helpers for the example's crash tests: starting workers, reading the export log.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hermes::Message;

use crate::ExportReport;

/// An export of `report` whose handler takes `seconds`.
pub fn slow_export(report: &str, seconds: u64) -> Message {
    Message::from_job(&ExportReport::slow(report, seconds as f64)).expect("a valid export")
}

/// Starts the worker program `program` (a `CARGO_BIN_EXE_…` path) on the example directory
/// `dir`, with the settings `env`, its output discarded.
pub fn start_worker(program: &str, dir: &Path, env: &[(&str, &str)]) -> Child {
    Command::new(program)
        .env("HERMES_DIR", dir)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the worker")
}

/// Waits up to `timeout` until the export log of `dir` has as many lines as `reports`,
/// then checks (half a second later, so a late duplicate shows) that each report was
/// exported exactly once. Returns when the last export was seen.
pub fn assert_each_exported_once(
    dir: &Path,
    reports: &[(String, u64)],
    timeout: Duration,
) -> Instant {
    wait_until("every export", timeout, || {
        exported(dir).len() >= reports.len()
    });
    let done = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for report in exported(dir) {
        *counts.entry(report).or_default() += 1;
    }
    let expected: BTreeMap<String, usize> = reports.iter().map(|(r, _)| (r.clone(), 1)).collect();
    assert_eq!(counts, expected, "every export exactly once");
    done
}

/// The reports in the export log of `dir`, in the order they finished.
pub fn exported(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("exports.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap_or_default().to_owned())
        .collect()
}

/// Polls `done` every 50 ms; panics naming `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let give_up = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < give_up, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits up to `timeout` for `child` to exit and returns whether it succeeded.
pub fn exits_cleanly(child: &mut std::process::Child, timeout: Duration) -> bool {
    let give_up = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("the worker's status") {
            return status.success();
        }
        assert!(Instant::now() < give_up, "the worker did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The 21 exports of a crash test: `r00`…`r19`, with `slow` (3 s) in the middle.
pub fn crash_test_reports() -> Vec<(String, u64)> {
    (0..21)
        .map(|i| match i {
            10 => ("slow".to_owned(), 3),
            i if i < 10 => (format!("r{i:02}"), 0),
            i => (format!("r{:02}", i - 1), 0),
        })
        .collect()
}
