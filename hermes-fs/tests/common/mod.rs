//! Shared by the filesystem driver's tests: temporary directories and the conformance harness.

#![allow(dead_code, unreachable_pub)]

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hermes_core::time::unix_now;
use hermes_core::{Error, async_trait};
use hermes_fs::{FileSystemDriver, FileSystemOptions};
use hermes_testkit::suite::Harness;

/// A directory under the system's temp folder, removed when dropped.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh directory whose name starts with `label`.
    pub fn new(label: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "hermes-fs-{label}-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Options with a short visibility timeout, for tests that wait for redelivery.
pub fn test_options() -> FileSystemOptions {
    let mut options = FileSystemOptions::default();
    options.visibility_timeout = Duration::from_secs(1);
    options
}

/// Writes `bytes` into `<dir>/<queue>/new/` under a valid message file name, as another
/// program could.
pub fn drop_file(dir: &Path, queue: &str, bytes: &[u8]) -> PathBuf {
    let new = dir.join(queue).join("new");
    std::fs::create_dir_all(&new).unwrap();
    let name = format!(
        "{:017.6}-{:016x}.json",
        unix_now() - 1.0,
        rand::random::<u64>()
    );
    let tmp = dir.join(queue).join(format!(".{name}"));
    std::fs::write(&tmp, bytes).unwrap();
    let path = new.join(name);
    std::fs::rename(&tmp, &path).unwrap();
    path
}

/// Takes the oldest message file of `<dir>/<queue>/new/` (the first name in name order, which
/// is due order) as another program could: its bytes, and the file removed. `None` when there
/// is none.
pub fn take_file(dir: &Path, queue: &str) -> std::io::Result<Option<Vec<u8>>> {
    let new = dir.join(queue).join("new");
    let entries = match std::fs::read_dir(&new) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        entries => entries?,
    };
    let mut names = entries
        .map(|entry| entry.map(|e| e.file_name()))
        .collect::<std::io::Result<Vec<_>>>()?;
    names.sort();
    let Some(oldest) = names.first() else {
        return Ok(None);
    };
    let path = new.join(oldest);
    let bytes = std::fs::read(&path)?;
    std::fs::remove_file(&path)?;
    Ok(Some(bytes))
}

/// Runs only the test `test` of this binary in a child process (as the unprivileged user
/// `nobody` when asked), with `HERMES_FS_CHILD` set to `value`, and checks that it passed.
pub fn run_in_child(test: &str, value: &std::path::Path, as_nobody: bool) {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env("HERMES_FS_CHILD", value);
    if as_nobody {
        command.uid(65534).gid(65534);
    }
    let output = command.output().unwrap();
    let log = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{log}");
    assert!(log.contains("1 passed"), "{log}");
}

/// The path a parent test handed to this child process, if this is one.
pub fn child_arg() -> Option<std::path::PathBuf> {
    std::env::var_os("HERMES_FS_CHILD").map(Into::into)
}

/// Runs `checks` on a fresh directory as a user whom permissions bind: this process when it is
/// not root, else the test `test` of this binary again, as the unprivileged user `nobody`, in a
/// child process (which then runs `checks` on the directory handed to it).
pub fn run_unprivileged(test: &str, label: &str, checks: fn(&Path)) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if let Some(dir) = child_arg() {
        checks(&dir);
        return;
    }
    let dir = TempDir::new(label);
    if std::fs::metadata(dir.path()).unwrap().uid() != 0 {
        checks(dir.path());
        return;
    }
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    run_in_child(test, dir.path(), true);
}

/// Files in a folder.
pub fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| entries.count())
}

/// Set in a copy of the test binary that a scenario started: the directory of the harness
/// that started it.
const SUITE_DIR: &str = "HERMES_FS_SUITE_DIR";

/// The conformance harness: a temporary directory per test, or in a copy of the test binary
/// that a scenario started, the directory of the harness that started it.
pub struct FsHarness {
    dir: PathBuf,
    /// The directory, when this harness made it (and removes it when dropped).
    _owned: Option<TempDir>,
}

impl FsHarness {
    /// A harness on a fresh temporary directory, or on the directory [`SUITE_DIR`] names.
    pub fn new() -> Self {
        if let Some(dir) = std::env::var_os(SUITE_DIR) {
            return FsHarness {
                dir: dir.into(),
                _owned: None,
            };
        }
        let owned = TempDir::new("suite");
        FsHarness {
            dir: owned.path().to_path_buf(),
            _owned: Some(owned),
        }
    }
}

impl Default for FsHarness {
    fn default() -> Self {
        FsHarness::new()
    }
}

#[async_trait]
impl Harness for FsHarness {
    type Driver = FileSystemDriver;

    async fn open(&self, queue: &str) -> Result<FileSystemDriver, Error> {
        FileSystemDriver::with_options(&self.dir, queue, test_options())
    }

    async fn open_with(
        &self,
        queue: &str,
        serializer: std::sync::Arc<dyn hermes_core::Serializer>,
    ) -> Result<FileSystemDriver, Error> {
        Ok(self.open(queue).await?.with_serializer(serializer))
    }

    async fn push_raw(&self, queue: &str, bytes: &[u8]) -> Result<(), Error> {
        drop_file(&self.dir, queue, bytes);
        Ok(())
    }

    async fn pull_raw(&self, queue: &str) -> Result<Option<Vec<u8>>, Error> {
        take_file(&self.dir, queue).map_err(|e| Error::io(format!("taking a file of {queue}"), e))
    }

    async fn quarantined(&self, queue: &str) -> Result<usize, Error> {
        let failed = self.dir.join(queue).join("failed");
        let reasons = std::fs::read_dir(&failed).map_or(0, |entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".reason"))
                .count()
        });
        Ok(count_files(&failed) - reasons)
    }

    fn visibility_timeout(&self) -> Duration {
        test_options().visibility_timeout
    }

    /// The directory: a copy of the test binary works in the same one.
    fn environment_of_copies(&self) -> Option<Vec<(String, String)>> {
        Some(vec![(SUITE_DIR.to_owned(), self.dir.display().to_string())])
    }
}
