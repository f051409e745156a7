//! A queue on a full disk (a small tmpfs the test mounts; needs root, as in CI): emits fail
//! with a clear, temporary error and leave nothing half-written in `new/` or `tmp/`; a
//! worker goes on handling what is there, and once that frees room, emits work again.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{TempDir, count_files};
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, JsonSerializer, Message, Serializer as _};
use hermes_fs::FileSystemDriver;
use hermes_testkit::suite::{available_or_skip, strict};

/// A tmpfs of `size` mounted on a fresh folder, unmounted when dropped.
struct SmallDisk {
    dir: TempDir,
    mounted: bool,
}

impl SmallDisk {
    fn mount(size: &str) -> Result<SmallDisk, String> {
        let dir = TempDir::new("disk-full");
        let output = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=755"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "cannot mount a tmpfs (the test needs root): {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(SmallDisk { dir, mounted: true })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(self.dir.path()).status();
        }
    }
}

fn message(n: usize) -> Message {
    Message::builder("job")
        .payload(&serde_json::json!({ "n": n, "filler": "x".repeat(6000) }))
        .build()
        .unwrap()
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_emits_cleanly_and_workers_go_on() {
    let disk = SmallDisk::mount("256k");
    let mountable = disk.as_ref().map(|_| ()).map_err(Clone::clone);
    if !available_or_skip(strict(), "disk_full", mountable) {
        return;
    }
    let disk = disk.unwrap();
    let driver = FileSystemDriver::new(disk.path(), "jobs").unwrap();
    let queue = disk.path().join("jobs");

    // Fill the disk.
    let mut sent = 0;
    let error = loop {
        match driver.send(&message(sent), DEFAULT_PRIORITY).await {
            Ok(()) => sent += 1,
            Err(e) => break e,
        }
        assert!(sent < 1000, "a 256 KiB disk never filled up");
    };
    assert!(sent > 5, "only {sent} messages fit");
    let text = error.to_string();
    assert!(
        matches!(
            error,
            Error::Driver {
                temporary: true,
                ..
            }
        ),
        "a full disk is a temporary error: {error:?}"
    );
    assert!(
        text.contains("No space left on device") && text.contains("cannot write"),
        "{text}"
    );
    assert!(
        !text.contains("xxxx"),
        "the error quotes no payload: {text}"
    );
    // A few more tries fail the same way and leave nothing behind.
    for n in 0..3 {
        assert!(
            driver
                .send(&message(1000 + n), DEFAULT_PRIORITY)
                .await
                .is_err()
        );
    }
    assert_eq!(
        count_files(&queue.join("tmp")),
        0,
        "nothing is left in tmp/"
    );
    let queued = files(&queue.join("new"));
    assert_eq!(queued.len(), sent, "only whole messages are in new/");
    for file in &queued {
        let bytes = std::fs::read(file).unwrap();
        let decoded = JsonSerializer
            .deserialize(&bytes)
            .unwrap_or_else(|e| panic!("{} is a whole message: {e}", file.display()));
        let filler = &decoded.payload().unwrap()["filler"];
        assert_eq!(filler.as_str().map(str::len), Some(6000));
    }

    // A worker handles everything that is there, while the disk is still full.
    let mut handled = Vec::new();
    while let Some(delivery) = driver
        .receive(&[], Duration::from_millis(200))
        .await
        .unwrap()
    {
        handled.push(delivery.message().payload().unwrap()["n"].as_u64().unwrap());
        driver.ack(&delivery).await.unwrap();
    }
    handled.sort_unstable();
    assert_eq!(handled, (0..sent as u64).collect::<Vec<_>>());

    // The room the worker freed takes emits again.
    driver.send(&message(2000), DEFAULT_PRIORITY).await.unwrap();
    let delivery = driver
        .receive(&[], Duration::from_secs(1))
        .await
        .unwrap()
        .expect("the new message");
    assert_eq!(delivery.message().payload().unwrap()["n"], 2000);
    driver.ack(&delivery).await.unwrap();
}
