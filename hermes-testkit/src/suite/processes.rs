//! A scenario's workers, in processes of their own where the backend allows, for the promises
//! that are about separate processes (a limit held across them, a job cancelled from another
//! one); in tasks of this process where the backend lives in it (memory).
//!
//! Copies of the test binary run the same test (`--exact`), with the environment naming the
//! queue and a folder they share with the scenario. In a copy,
//! [`run_with_strictness`](super::run_with_strictness) hands the scenario that queue, and the
//! scenario serves as a worker ([`serve_as_copy`]) instead of running its usual body. Workers
//! tell the scenario what they saw through [`Notes`].

use std::future::Future;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_core::{CancellationToken, Dispatcher};

use super::Harness;
use super::support::open;

/// Set in a copy: the queue the scenario runs on.
const QUEUE: &str = "HERMES_TESTKIT_COPY_QUEUE";
/// Set in a copy: the folder it shares with the scenario.
const FOLDER: &str = "HERMES_TESTKIT_COPY_FOLDER";
/// The file of the shared folder the workers' notes go to.
const NOTES_FILE: &str = "notes";
/// The file whose presence in the shared folder asks the copies to stop.
const STOP_FILE: &str = "stop";
/// How long a worker that was asked to stop may take to end.
const EXIT_PATIENCE: Duration = Duration::from_secs(60);

tokio::task_local! {
    /// The name of the test being run (as `cargo test -- --exact` takes it).
    static TEST: String;
}

/// Runs `scenario` knowing it belongs to the test `test`, so that it can start copies of it.
pub(crate) async fn within_test<F: Future>(test: Option<String>, scenario: F) -> F::Output {
    match test {
        Some(test) => TEST.scope(test, scenario).await,
        None => scenario.await,
    }
}

/// The queue of the scenario this process is a copy for, when it is one.
pub(crate) fn queue_of_this_copy() -> Option<String> {
    std::env::var(QUEUE).ok()
}

/// The folder this process shares with its scenario, when it is a copy.
fn folder_of_this_copy() -> Option<PathBuf> {
    std::env::var_os(FOLDER).map(PathBuf::from)
}

/// Lines the workers write and the scenario reads: in memory shared with tasks of this
/// process, or in a file shared with copies (each line one write to a file opened for
/// appending, so lines of several processes never interleave).
#[derive(Debug, Clone)]
pub(crate) enum Notes {
    /// Shared with tasks of this process.
    Shared(Arc<Mutex<Vec<String>>>),
    /// The file shared with copies.
    File(Arc<NotesFile>),
}

/// The file of [`Notes`] shared with copies; the scenario's removes the shared folder when
/// the last of its notes is dropped.
#[derive(Debug)]
pub(crate) struct NotesFile {
    path: PathBuf,
    /// The shared folder, in the scenario's process (not in the copies').
    owned_folder: Option<PathBuf>,
}

impl Drop for NotesFile {
    fn drop(&mut self) {
        if let Some(folder) = &self.owned_folder {
            let _ = std::fs::remove_dir_all(folder);
        }
    }
}

impl Notes {
    /// Adds `line`.
    pub(crate) fn push(&self, line: String) {
        match self {
            Notes::Shared(lines) => lines.lock().unwrap().push(line),
            Notes::File(file) => {
                use std::io::Write as _;
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&file.path)
                    .expect("the notes file");
                file.write_all(format!("{line}\n").as_bytes())
                    .expect("a line of the notes file");
            }
        }
    }

    /// Every line so far.
    pub(crate) fn read(&self) -> Vec<String> {
        match self {
            Notes::Shared(lines) => lines.lock().unwrap().clone(),
            Notes::File(file) => std::fs::read_to_string(&file.path)
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect(),
        }
    }
}

/// A dispatcher running in a task of this process; its shutdown fires when it is dropped.
pub(crate) struct Running {
    token: CancellationToken,
    task: Option<tokio::task::JoinHandle<Result<(), hermes_core::Error>>>,
}

impl Running {
    /// Runs `dispatcher` in a task.
    pub(crate) fn start(dispatcher: Dispatcher) -> Running {
        let token = dispatcher.cancellation_token();
        let task = tokio::spawn(async move { dispatcher.handle(&[]).await });
        Running {
            token,
            task: Some(task),
        }
    }

    /// Stops it and checks that it ended without an error.
    ///
    /// # Panics
    /// When the dispatcher failed or did not stop in time.
    pub(crate) async fn stop(mut self) {
        self.token.cancel();
        let task = self.task.take().expect("a running dispatcher");
        tokio::time::timeout(EXIT_PATIENCE, task)
            .await
            .expect("the dispatcher did not stop")
            .expect("the dispatcher task")
            .expect("the dispatcher failed");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

/// A scenario's workers: copies of the test binary, or tasks of this process.
pub(crate) enum Workers {
    /// Copies of the test binary.
    Copies(Copies),
    /// Dispatchers in tasks.
    Tasks(Vec<Running>),
}

/// Copies of the test binary, and the folder they share with the scenario (removed with the
/// scenario's [`Notes`]); dropped, they are killed.
pub(crate) struct Copies {
    children: Vec<Child>,
    folder: PathBuf,
}

impl Workers {
    /// Starts `n` workers on `queue`, each the dispatcher `make` builds from an instance the
    /// harness opens and the notes it is to write to: copies of this test when the harness's
    /// backend can be reached from another process and the test is known, else tasks. The
    /// copies run this scenario, which must then call [`serve_as_copy`] with the same `make`.
    ///
    /// # Panics
    /// When a copy cannot be started.
    pub(crate) async fn start<H, F>(h: &H, queue: &str, n: usize, make: F) -> (Workers, Notes)
    where
        H: Harness,
        F: Fn(H::Driver, Notes) -> Dispatcher,
    {
        let copies = h
            .environment_of_copies()
            .zip(TEST.try_with(Clone::clone).ok());
        let Some((environment, test)) = copies else {
            let notes = Notes::Shared(Arc::default());
            let mut tasks = Vec::with_capacity(n);
            for _ in 0..n {
                tasks.push(Running::start(make(open(h, queue).await, notes.clone())));
            }
            return (Workers::Tasks(tasks), notes);
        };
        let folder = std::env::temp_dir().join(format!(
            "hermes-testkit-{queue}-{:08x}",
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&folder).expect("a folder for the copies");
        let program = std::env::current_exe().expect("the test binary");
        let children = (0..n)
            .map(|_| {
                Command::new(&program)
                    .args([&test, "--exact", "--nocapture", "--test-threads=1"])
                    .env(QUEUE, queue)
                    .env(FOLDER, &folder)
                    .envs(environment.iter().map(|(k, v)| (k, v)))
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("a copy of the test binary")
            })
            .collect();
        let notes = Notes::File(Arc::new(NotesFile {
            path: folder.join(NOTES_FILE),
            owned_folder: Some(folder.clone()),
        }));
        (Workers::Copies(Copies { children, folder }), notes)
    }

    /// Whether the workers are copies of the test binary.
    pub(crate) fn are_copies(&self) -> bool {
        matches!(self, Workers::Copies(_))
    }

    /// Stops the workers (running jobs finish) and checks that each ended well.
    ///
    /// # Panics
    /// When a worker failed or did not stop in time.
    pub(crate) async fn stop(self) {
        match self {
            Workers::Tasks(tasks) => {
                for task in tasks {
                    task.stop().await;
                }
            }
            Workers::Copies(mut copies) => {
                std::fs::write(copies.folder.join(STOP_FILE), b"").expect("the stop file");
                let children = std::mem::take(&mut copies.children);
                let statuses = tokio::task::spawn_blocking(move || wait_all(children))
                    .await
                    .expect("waiting for the copies");
                drop(copies);
                for status in statuses {
                    assert!(status.success(), "a worker process failed: {status}");
                }
            }
        }
    }
}

impl Drop for Copies {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits for every child, for at most [`EXIT_PATIENCE`] in all.
fn wait_all(children: Vec<Child>) -> Vec<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + EXIT_PATIENCE;
    let mut statuses = Vec::with_capacity(children.len());
    for mut child in children {
        loop {
            if let Some(status) = child.try_wait().expect("a worker process's status") {
                statuses.push(status);
                break;
            }
            if std::time::Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("a worker process did not stop within {EXIT_PATIENCE:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    statuses
}

/// In a copy started by [`Workers::start`]: runs the worker `make` builds until the scenario
/// asks it to stop, and returns `true`. Elsewhere returns `false` at once.
///
/// # Panics
/// When the worker fails.
pub(crate) async fn serve_as_copy<H, F>(h: &H, queue: &str, make: F) -> bool
where
    H: Harness,
    F: Fn(H::Driver, Notes) -> Dispatcher,
{
    let Some(folder) = folder_of_this_copy() else {
        return false;
    };
    let notes = Notes::File(Arc::new(NotesFile {
        path: folder.join(NOTES_FILE),
        owned_folder: None,
    }));
    let worker = Running::start(make(open(h, queue).await, notes));
    while !folder.join(STOP_FILE).exists() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    worker.stop().await;
    true
}

/// Now, in microseconds since the Unix epoch: one clock for every process of the machine.
pub(crate) fn micros_now() -> u64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
}
