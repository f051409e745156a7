//! The filesystem driver's own behaviour: folder layout, names, wake-ups, and hostile input.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, Instant};

use common::{
    TempDir, child_arg, count_files, drop_file, run_in_child, run_unprivileged, test_options,
};
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, Message};
use hermes_fs::{FileSystemDriver, FileSystemOptions};
use hermes_testkit::bench::cpu_time;

fn message(n: u32) -> Message {
    Message::builder("t")
        .payload(&serde_json::json!({ "n": n }))
        .build()
        .unwrap()
}

fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn folders_are_created_on_first_use_with_mode_0775_minus_umask() {
    let dir = TempDir::new("layout");
    let root = dir.path().join("var").join("hermes");
    let driver = FileSystemDriver::new(&root, "exports").unwrap();
    assert!(!root.exists(), "nothing is created before first use");
    driver.send(&message(1), DEFAULT_PRIORITY).await.unwrap();
    for sub in ["tmp", "new", "processing", "failed"] {
        let meta = std::fs::metadata(root.join("exports").join(sub)).unwrap();
        assert!(meta.is_dir());
        // The umask can only take bits away from 0775.
        assert_eq!(meta.mode() & 0o777 & !0o775, 0, "{sub}: {:o}", meta.mode());
    }
    let names = names_in(&root.join("exports").join("new"));
    assert_eq!(names.len(), 1);
    let name = &names[0];
    // 1700000000.250000-3f9c1a2b7d4e5f60.json
    let (due, rest) = name.split_once('-').unwrap();
    assert_eq!(due.len(), 17);
    assert_eq!(due.find('.'), Some(10));
    assert_eq!(rest.len(), 16 + ".json".len());
    assert!(
        rest.trim_end_matches(".json")
            .chars()
            .all(|c| c.is_ascii_hexdigit())
    );
    assert_eq!(count_files(&root.join("exports").join("tmp")), 0);
}

#[tokio::test]
async fn claims_are_renamed_into_processing_with_the_claim_time() {
    let dir = TempDir::new("claim");
    let driver = FileSystemDriver::with_options(dir.path(), "q", test_options()).unwrap();
    driver.send(&message(1), DEFAULT_PRIORITY).await.unwrap();
    let name = names_in(&dir.path().join("q/new")).remove(0);
    let delivery = driver
        .receive(&[], Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    let claimed = names_in(&dir.path().join("q/processing"));
    assert_eq!(claimed.len(), 1);
    let (claim_time, original) = claimed[0].split_once('~').unwrap();
    assert_eq!(original, name);
    let claim_time: f64 = claim_time.parse().unwrap();
    assert!((claim_time - hermes_core::time::unix_now()).abs() < 5.0);
    driver.ack(&delivery).await.unwrap();
    assert_eq!(count_files(&dir.path().join("q/processing")), 0);
    assert_eq!(count_files(&dir.path().join("q/new")), 0);
}

#[test]
fn hostile_queue_names_are_refused_before_any_file_is_touched() {
    let dir = TempDir::new("names");
    for bad in ["..", "../x", "a/b", "", ".hidden", "a\0b", "x y", "ü"] {
        let err = FileSystemDriver::new(dir.path(), bad).unwrap_err();
        assert!(
            matches!(err, Error::InvalidQueueName { .. }),
            "{bad:?}: {err}"
        );
        let driver = FileSystemDriver::new(dir.path(), "ok").unwrap();
        let err = driver.setup_priority_queue(bad, 5).unwrap_err();
        assert!(
            matches!(err, Error::InvalidQueueName { .. }),
            "{bad:?}: {err}"
        );
    }
    assert_eq!(count_files(dir.path()), 0, "nothing was created");
    assert!(!dir.path().parent().unwrap().join("x").exists());
}

#[tokio::test]
async fn an_idle_worker_is_woken_within_milliseconds_by_another_process_send() {
    let dir = TempDir::new("wake");
    let mut options = test_options();
    options.refresh_interval = Duration::from_secs(30);
    let worker = FileSystemDriver::with_options(dir.path(), "q", options.clone()).unwrap();
    let emitter = FileSystemDriver::with_options(dir.path(), "q", options).unwrap();
    // The worker is idle: the queue is empty and it waits.
    assert!(
        worker
            .receive(&[], Duration::from_millis(100))
            .await
            .unwrap()
            .is_none()
    );
    let waiting = tokio::spawn(async move {
        let d = worker.receive(&[], Duration::from_secs(10)).await.unwrap();
        (d.is_some(), Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent_at = Instant::now();
    emitter.send(&message(1), DEFAULT_PRIORITY).await.unwrap();
    let (got, at) = waiting.await.unwrap();
    assert!(got);
    let latency = at.duration_since(sent_at);
    assert!(
        latency < Duration::from_millis(250),
        "woken after {latency:?}"
    );
}

#[tokio::test]
async fn without_notifications_workers_poll_every_refresh_interval() {
    let dir = TempDir::new("poll");
    let mut options = test_options();
    options.watch = false;
    options.refresh_interval = Duration::from_millis(300);
    let worker = FileSystemDriver::with_options(dir.path(), "q", options.clone()).unwrap();
    let emitter = FileSystemDriver::with_options(dir.path(), "q", options).unwrap();
    assert!(worker.receive(&[], Duration::ZERO).await.unwrap().is_none());
    emitter.send(&message(1), DEFAULT_PRIORITY).await.unwrap();
    let started = Instant::now();
    let d = worker.receive(&[], Duration::from_secs(5)).await.unwrap();
    assert!(d.is_some());
    assert!(
        started.elapsed() < Duration::from_millis(1000),
        "{:?}",
        started.elapsed()
    );
}

/// Measured in a process of its own, so other tests' work does not count.
#[test]
fn an_idle_worker_uses_no_measurable_cpu() {
    let Some(dir) = child_arg() else {
        let dir = TempDir::new("idle");
        run_in_child("an_idle_worker_uses_no_measurable_cpu", dir.path(), false);
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let worker = FileSystemDriver::with_options(&dir, "q", test_options()).unwrap();
        assert!(worker.receive(&[], Duration::ZERO).await.unwrap().is_none());
        let before = cpu_time();
        assert!(
            worker
                .receive(&[], Duration::from_secs(3))
                .await
                .unwrap()
                .is_none()
        );
        let used = cpu_time() - before;
        println!("an idle 3 s wait used {used:?} of CPU");
        assert!(
            used <= Duration::from_millis(20),
            "an idle 3 s wait used {used:?} of CPU"
        );
    });
}

#[tokio::test]
async fn garbage_and_empty_files_go_to_failed_and_the_worker_goes_on() {
    let dir = TempDir::new("garbage");
    let driver = FileSystemDriver::with_options(dir.path(), "q", test_options()).unwrap();
    let garbage = drop_file(dir.path(), "q", b"\x00\xffnot json");
    let empty = drop_file(dir.path(), "q", b"");
    let good = message(1);
    driver.send(&good, DEFAULT_PRIORITY).await.unwrap();
    let mut errors = Vec::new();
    let mut delivered = None;
    for _ in 0..3 {
        match driver.receive(&[], Duration::from_secs(2)).await {
            Ok(Some(d)) => delivered = Some(d),
            Ok(None) => break,
            Err(e) => errors.push(e),
        }
    }
    assert_eq!(errors.len(), 2, "{errors:?}");
    for e in &errors {
        assert!(matches!(e, Error::Undecodable { .. }), "{e}");
        assert!(e.to_string().contains("/q/failed/"), "{e}");
    }
    assert!(errors.iter().any(|e| e.to_string().contains("length 0")));
    assert_eq!(delivered.unwrap().message().id(), good.id());
    let failed = names_in(&dir.path().join("q/failed"));
    let expected: Vec<String> = {
        let mut v = Vec::new();
        for file in [&garbage, &empty] {
            let name = file.file_name().unwrap().to_str().unwrap().to_owned();
            v.push(format!("{name}.reason"));
            v.push(name);
        }
        v.sort();
        v
    };
    assert_eq!(
        failed, expected,
        "kept under their names in failed/, each beside its reason"
    );
    let reason: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("q/failed").join(&expected[1])).unwrap(),
    )
    .unwrap();
    assert_eq!(reason["kind"], "undecodable", "{reason}");
    assert!(
        reason["error"].as_str().unwrap().contains("length"),
        "{reason}"
    );
    assert!(reason["at"].as_f64().unwrap() > 1.7e9, "{reason}");
}

#[tokio::test]
async fn foreign_names_links_and_folders_in_new_are_skipped_and_kept() {
    let dir = TempDir::new("foreign");
    let secret = dir.path().join("secret.json");
    let valid_json = br#"{"message":{"id":"leak","type":"t","created":1,"payload":null,"execute_at":null,"retries":0}}"#;
    std::fs::write(&secret, valid_json).unwrap();
    let new = dir.path().join("q/new");
    std::fs::create_dir_all(&new).unwrap();
    std::fs::write(new.join("notes.txt"), b"hello").unwrap();
    std::fs::write(new.join("zzz.json"), valid_json).unwrap();
    std::os::unix::fs::symlink(&secret, new.join("0000000000.000001-0000000000000001.json"))
        .unwrap();
    std::fs::create_dir(new.join("0000000000.000002-0000000000000002.json")).unwrap();

    let driver = FileSystemDriver::with_options(dir.path(), "q", test_options()).unwrap();
    let good = message(7);
    driver.send(&good, DEFAULT_PRIORITY).await.unwrap();
    let d = driver
        .receive(&[], Duration::from_secs(2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.message().id(), good.id());
    driver.ack(&d).await.unwrap();
    assert!(
        driver
            .receive(&[], Duration::from_millis(300))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        names_in(&new),
        [
            "0000000000.000001-0000000000000001.json",
            "0000000000.000002-0000000000000002.json",
            "notes.txt",
            "zzz.json"
        ],
        "all left in place"
    );
    assert_eq!(
        std::fs::read(&secret).unwrap(),
        valid_json,
        "the link target is untouched"
    );
    assert_eq!(count_files(&dir.path().join("q/failed")), 0);
}

#[tokio::test]
async fn a_link_arriving_while_the_worker_runs_is_never_followed() {
    let dir = TempDir::new("latelink");
    let driver = FileSystemDriver::with_options(dir.path(), "q", test_options()).unwrap();
    assert!(driver.receive(&[], Duration::ZERO).await.unwrap().is_none());
    let secret = dir.path().join("secret.json");
    std::fs::write(
        &secret,
        br#"{"message":{"id":"leak","type":"t","created":1}}"#,
    )
    .unwrap();
    let link = dir
        .path()
        .join("q/new/0000000001.000000-00000000000000aa.json");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    assert!(
        driver
            .receive(&[], Duration::from_millis(500))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "kept"
    );
}

/// Makes a folder read-only for the test; as root, permissions do not apply, so the check runs
/// as the unprivileged user `nobody` in a child process instead.
#[test]
fn a_read_only_queue_folder_gives_clear_errors_and_loses_nothing() {
    run_unprivileged(
        "a_read_only_queue_folder_gives_clear_errors_and_loses_nothing",
        "readonly",
        read_only_checks,
    );
}

fn read_only_checks(dir: &std::path::Path) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let driver = FileSystemDriver::with_options(dir, "q", test_options()).unwrap();
        let kept = message(1);
        driver.send(&kept, DEFAULT_PRIORITY).await.unwrap();
        let new = dir.join("q/new");
        let tmp = dir.join("q/tmp");
        std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o555)).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o555)).unwrap();

        let err = driver
            .send(&message(2), DEFAULT_PRIORITY)
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("cannot write") && text.contains("/q/tmp/"),
            "{text}"
        );
        assert!(text.contains("ermission denied"), "{text}");
        assert!(
            err.is_temporary(),
            "an operator can fix it while the worker waits"
        );

        let err = driver
            .receive(&[], Duration::from_secs(1))
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("cannot claim") && text.contains("/q/new/"),
            "{text}"
        );
        assert!(err.is_temporary());
        assert_eq!(count_files(&new), 1, "the message is still there");

        std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o775)).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o775)).unwrap();
        let d = driver
            .receive(&[], Duration::from_secs(1))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            d.message().id(),
            kept.id(),
            "once fixed, the worker goes on"
        );
        driver.ack(&d).await.unwrap();
    });
}

#[tokio::test]
async fn zero_visibility_timeout_never_redelivers() {
    let dir = TempDir::new("novis");
    let mut options = test_options();
    options.visibility_timeout = Duration::ZERO;
    let driver = FileSystemDriver::with_options(dir.path(), "q", options.clone()).unwrap();
    assert!(!driver.capabilities().at_least_once);
    driver.send(&message(1), DEFAULT_PRIORITY).await.unwrap();
    let d = driver
        .receive(&[], Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    drop(d);
    let other = FileSystemDriver::with_options(dir.path(), "q", options).unwrap();
    assert!(
        other
            .receive(&[], Duration::from_millis(1500))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        count_files(&dir.path().join("q/processing")),
        1,
        "left for an operator"
    );
}

#[tokio::test]
async fn durable_mode_sends_and_receives() {
    let dir = TempDir::new("durable");
    let mut options = FileSystemOptions::default();
    options.durable = true;
    let driver = FileSystemDriver::with_options(dir.path(), "q", options).unwrap();
    let m = message(1);
    driver.send(&m, DEFAULT_PRIORITY).await.unwrap();
    let d = driver
        .receive(&[], Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.message(), &m);
}

/// A message file is named after the message's due time: its `execute_at`, else its
/// `created` (what is in the file is the conformance suite's `php_json_in_hermes_json_out`).
#[tokio::test]
async fn a_file_is_named_after_its_due_time() {
    let dir = TempDir::new("names");
    let driver = FileSystemDriver::with_options(dir.path(), "q", test_options()).unwrap();
    let created = Message::builder("t")
        .id("rust-1")
        .created(1700000000.0)
        .build()
        .unwrap();
    let delayed = Message::builder("t")
        .id("rust-2")
        .created(1700000000.0)
        .execute_at(1700000100.5)
        .build()
        .unwrap();
    driver.send(&created, DEFAULT_PRIORITY).await.unwrap();
    driver.send(&delayed, DEFAULT_PRIORITY).await.unwrap();
    let names = names_in(&dir.path().join("q/new"));
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[0].starts_with("1700000000.000000-"), "{names:?}");
    assert!(names[1].starts_with("1700000100.500000-"), "{names:?}");
}

#[tokio::test]
async fn a_removed_processing_folder_is_created_again() {
    let dir = TempDir::new("healing");
    let driver = FileSystemDriver::with_options(dir.path(), "q", test_options()).unwrap();
    let m = message(1);
    driver.send(&m, DEFAULT_PRIORITY).await.unwrap();
    assert!(
        driver
            .receive(&[], Duration::ZERO)
            .await
            .unwrap()
            .is_some_and(|d| d.message().id() == m.id())
    );
    let second = message(2);
    driver.send(&second, DEFAULT_PRIORITY).await.unwrap();
    std::fs::remove_dir_all(dir.path().join("q/processing")).unwrap();
    let d = driver
        .receive(&[], Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.message().id(), second.id());
    driver.ack(&d).await.unwrap();
}
