//! The harness fails a run that lost a message, whose worker exited by itself, or that ran
//! more handlers at once than its limit, and passes a clean one: its verdict can go both ways.

use std::process::{Command, Output};

fn soak(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hermes-soak"))
        .args(["--messages", "300", "--workers", "2", "--concurrency", "4"])
        .args(["--kill-every", "0", "--visibility", "1s"])
        .args(args)
        .output()
        .expect("the harness runs")
}

fn summary(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout.lines().last().unwrap_or_default().to_owned()
}

/// The number after `name` in the summary line (`lost 3` gives 3).
fn figure(summary: &str, name: &str) -> u64 {
    summary
        .split(", ")
        .find_map(|part| part.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no figure {name} in {summary:?}"))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_clean_run_passes() {
    let output = soak(&["--driver", "memory"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        summary(&output).starts_with("sent 300, handled 300 distinct, duplicates 0, lost 0"),
        "{}",
        summary(&output)
    );
}

#[test]
fn a_lost_message_fails_the_run() {
    let output = soak(&[
        "--driver",
        "memory",
        "--sabotage-lose-every",
        "50",
        "--stall-timeout",
        "3s",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let lost = figure(&summary(&output), "lost");
    // Each of the two workers drops every 50th of its messages: 5 or 6 of the 300.
    assert!((5..=6).contains(&lost), "{}", summary(&output));
    let reason = format!("{lost} messages emitted with Ok were lost");
    assert!(stderr(&output).contains(&reason), "{}", stderr(&output));
}

#[test]
fn a_worker_that_exits_by_itself_fails_the_run() {
    let output = soak(&["--driver", "fs", "--sabotage-exit-after", "40"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("exited by itself"),
        "{}",
        stderr(&output)
    );
    // The run goes on with a new worker, and loses nothing.
    assert_eq!(figure(&summary(&output), "lost"), 0, "{}", summary(&output));
}

#[test]
fn a_setting_it_cannot_use_is_refused() {
    let output = soak(&["--driver", "fs", "--broker-restart-every", "5s"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no broker to restart"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_limited_run_stays_within_its_limit() {
    let output = soak(&["--driver", "fs", "--limit", "2"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let at_once = figure(&summary(&output), "at once");
    assert!((1..=2).contains(&at_once), "{}", summary(&output));
}

#[test]
fn a_run_over_its_limit_fails() {
    let output = soak(&["--driver", "fs", "--limit", "1", "--sabotage-ignore-limit"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let at_once = figure(&summary(&output), "at once");
    assert!(at_once > 1, "{}", summary(&output));
    let reason = format!("{at_once} handlers ran at once, above --limit 1");
    assert!(stderr(&output).contains(&reason), "{}", stderr(&output));
}

/// A small `groups` run on the memory driver, with extra arguments.
fn groups(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hermes-soak"))
        .args("groups --driver memory --batches 10 --batch-size 10".split(' '))
        .args("--chains 10 --steps 3 --kill-every 0 --visibility 1s".split(' '))
        .args(args)
        .output()
        .expect("the harness runs")
}

#[test]
fn a_clean_groups_run_passes() {
    let output = groups(&[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = summary(&output);
    assert_eq!(figure(&summary, "callbacks"), 10, "{summary}");
    assert_eq!(figure(&summary, "chains finished"), 10, "{summary}");
    assert_eq!(figure(&summary, "lost"), 0, "{summary}");
}

#[test]
fn a_lost_batch_job_fails_a_groups_run() {
    let output = groups(&["--sabotage-lose-every", "7", "--stall-timeout", "3s"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        figure(&summary(&output), "lost") > 0,
        "{}",
        summary(&output)
    );
    assert!(stderr(&output).contains("never ran"), "{}", stderr(&output));
}

#[test]
fn a_callback_run_twice_fails_a_groups_run() {
    let output = groups(&["--sabotage-rerun-callbacks"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("on a worker that lived on"),
        "{}",
        stderr(&output)
    );
}
