//! Files in `new/` that a worker must not trip over: FIFOs, sockets, unreadable files, and
//! names whose due time is far ahead or written with another width.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{TempDir, drop_file, run_unprivileged, test_options};
use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Driver, JsonSerializer, Message, Serializer};
use hermes_fs::FileSystemDriver;

/// A message file name due at `due`, written with `width` characters for the time.
fn name_due(due: f64, width: usize) -> String {
    format!("{due:0width$.6}-{:016x}.json", rand::random::<u64>())
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Sends `n` messages and receives them all within `limit`, acknowledging each; returns the
/// ids received.
async fn drain(driver: &FileSystemDriver, n: usize, limit: Duration) -> Vec<String> {
    let started = Instant::now();
    let mut got = Vec::new();
    while got.len() < n {
        let left = limit.saturating_sub(started.elapsed());
        let Some(d) = driver.receive(&[], left).await.unwrap() else {
            panic!("only {} of {n} messages within {limit:?}", got.len());
        };
        got.push(d.message().id().to_owned());
        driver.ack(&d).await.unwrap();
    }
    got
}

fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

fn is_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// FIFOs and sockets with message file names, there before the worker starts and arriving while
/// it waits, block nothing and stop no worker; they are skipped and left in place.
#[test]
fn fifos_and_sockets_in_new_are_skipped_and_kept() {
    // A FIFO opened for reading blocks the runtime's threads, where no timeout can fire: a
    // watchdog thread fails the test instead of letting it hang.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watched = done.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        if !watched.load(std::sync::atomic::Ordering::SeqCst) {
            eprintln!("fifos_and_sockets_in_new_are_skipped_and_kept: blocked for 60 s");
            std::process::exit(101);
        }
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = TempDir::new("special");
        let driver = FileSystemDriver::with_options(dir.path(), "q", test_options()).unwrap();
        let new = dir.path().join("q/new");
        std::fs::create_dir_all(&new).unwrap();
        let early = unix_now() - 60.0;
        let mut specials: Vec<PathBuf> = Vec::new();
        let fifo = new.join(name_due(early, 17));
        mkfifo(&fifo);
        let socket = new.join(name_due(early + 1.0, 17));
        let _listener = UnixListener::bind(&socket).unwrap();
        specials.extend([fifo, socket]);
        let sent: Vec<Message> = (0..3).map(|_| Message::new("t")).collect();
        for m in &sent {
            driver.send(m, DEFAULT_PRIORITY).await.unwrap();
        }
        let got = tokio::time::timeout(
            Duration::from_secs(10),
            drain(&driver, 3, Duration::from_secs(5)),
        )
        .await
        .expect("a special file blocked the worker");
        assert_eq!(got.len(), 3);
        // Arriving while the worker waits (found through notifications).
        let waiting = {
            let driver = driver.clone();
            tokio::spawn(async move { drain(&driver, 1, Duration::from_secs(5)).await })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        let fifo = new.join(name_due(early + 2.0, 17));
        mkfifo(&fifo);
        let socket = new.join(name_due(early + 3.0, 17));
        let _listener2 = UnixListener::bind(&socket).unwrap();
        specials.extend([fifo, socket]);
        tokio::time::sleep(Duration::from_millis(200)).await;
        driver
            .send(&Message::new("t"), DEFAULT_PRIORITY)
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("a special file blocked the waiting worker")
            .unwrap();
        assert!(is_fifo(&specials[0]) && is_fifo(&specials[2]), "FIFOs kept");
        assert!(
            is_socket(&specials[1]) && is_socket(&specials[3]),
            "sockets kept"
        );
        assert!(
            driver
                .receive(&[], Duration::from_millis(300))
                .await
                .unwrap()
                .is_none()
        );
    });
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// A file the worker cannot read (mode 000, read by a user other than root) is skipped and kept,
/// and the messages behind it are handled at once. Root reads any file, so the check runs as
/// the unprivileged user `nobody` in a child process.
#[test]
fn an_unreadable_file_does_not_stall_the_files_behind_it() {
    run_unprivileged(
        "an_unreadable_file_does_not_stall_the_files_behind_it",
        "unreadable",
        unreadable_checks,
    );
}

fn unreadable_checks(dir: &Path) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let driver = FileSystemDriver::with_options(dir, "q", test_options()).unwrap();
        let locked = drop_file(
            dir,
            "q",
            &JsonSerializer.serialize(&Message::new("t")).unwrap(),
        );
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        for _ in 0..5 {
            driver
                .send(&Message::new("t"), DEFAULT_PRIORITY)
                .await
                .unwrap();
        }
        let started = Instant::now();
        drain(&driver, 5, Duration::from_secs(2)).await;
        println!(
            "5 messages behind an unreadable file in {:?}",
            started.elapsed()
        );
        assert!(locked.exists(), "the unreadable file is kept in new/");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o644)).unwrap();
    });
}

/// Due times past 1e10 (the year 2286), whose names are wider than today's, and names written
/// with another width (as another program may) are ordered by their time: a message due now is
/// not stuck behind them, and they wait for their time.
#[tokio::test]
async fn names_are_ordered_by_their_due_time_whatever_their_width() {
    let dir = TempDir::new("width");
    let driver = FileSystemDriver::with_options(dir.path(), "q", test_options()).unwrap();
    let new = dir.path().join("q/new");
    std::fs::create_dir_all(&new).unwrap();
    let body = JsonSerializer.serialize(&Message::new("far")).unwrap();
    for name in [
        name_due(1e10, 17),
        name_due(99_999_999_999.5, 17),
        name_due(unix_now() + 3600.0, 20),
    ] {
        std::fs::write(new.join(name), &body).unwrap();
    }
    // Due a minute ago, written narrower and wider than the driver writes.
    let mut due_now = Vec::new();
    for (i, width) in [10, 17, 24].into_iter().enumerate() {
        let m = Message::new("now");
        due_now.push(m.id().to_owned());
        let name = name_due(unix_now() - 60.0 + i as f64, width);
        std::fs::write(new.join(name), JsonSerializer.serialize(&m).unwrap()).unwrap();
    }
    let got = drain(&driver, 3, Duration::from_secs(3)).await;
    assert_eq!(got, due_now, "due order, whatever the width");
    assert!(
        driver
            .receive(&[], Duration::from_millis(500))
            .await
            .unwrap()
            .is_none(),
        "the far ones wait"
    );
    // One sent with a due time far ahead waits too, and does not block what comes after it.
    let far = Message::builder("far").execute_at(2e11).build().unwrap();
    driver.send(&far, DEFAULT_PRIORITY).await.unwrap();
    let after = Message::new("after");
    driver.send(&after, DEFAULT_PRIORITY).await.unwrap();
    assert_eq!(
        drain(&driver, 1, Duration::from_secs(3)).await,
        [after.id()]
    );
}

/// A message put in `new/` ahead of its `execute_at` is renamed to a name due at that time, so
/// every reader of the folder (PHP's included) waits for it.
#[tokio::test]
async fn an_early_file_is_renamed_to_its_due_time() {
    let dir = TempDir::new("early");
    let driver = FileSystemDriver::with_options(dir.path(), "q", test_options()).unwrap();
    let due = unix_now() + 3600.0;
    let m = Message::builder("later").execute_at(due).build().unwrap();
    let path = drop_file(dir.path(), "q", &JsonSerializer.serialize(&m).unwrap());
    assert!(
        driver
            .receive(&[], Duration::from_millis(500))
            .await
            .unwrap()
            .is_none()
    );
    assert!(!path.exists());
    let names: Vec<String> = std::fs::read_dir(dir.path().join("q/new"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let (time, _) = names[0].split_once('-').unwrap();
    let time: f64 = time.parse().unwrap();
    assert!((time - due).abs() < 1e-3, "{} for {due}", names[0]);
}
