//! The run's workers: processes of this program (or, for the memory driver, threads of this
//! process), which the run starts, kills, pauses and finally stops.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hermes_core::{CancellationToken, Dispatcher, Driver as _};
use hermes_testkit::MemoryDriver;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::args::Sabotage;
use crate::groups::jobs::GroupLog;
use crate::handler::SoakHandler;
use crate::target::Target;
use crate::worker::Handlers;

/// What a run does to its workers.
pub trait Workers {
    /// Starts one more worker.
    ///
    /// # Errors
    /// When it cannot be started.
    fn spawn(&mut self) -> Result<(), String>;

    /// The ids of the running workers.
    fn ids(&self) -> Vec<u64>;

    /// Kills worker `id` at once, as SIGKILL does: nothing it holds is given back.
    fn kill(&mut self, id: u64);

    /// Stops (`true`) or resumes (`false`) worker `id`, as SIGSTOP and SIGCONT do.
    fn freeze(&mut self, id: u64, frozen: bool);

    /// The workers that exited by themselves since the last call, each with why; they are no
    /// longer counted as running.
    fn exited(&mut self) -> Vec<String>;

    /// Asks every worker to shut down gracefully and waits up to `timeout` for each; returns
    /// what went wrong (a worker that failed or did not stop in time).
    fn stop(&mut self, timeout: Duration) -> Vec<String>;

    /// The name worker `id` logs its runs under, while it runs.
    fn name_of(&self, id: u64) -> Option<String>;

    /// Where a worker's own output is, to quote when it failed.
    fn output_of(&self, _id: u64) -> Option<PathBuf> {
        None
    }

    /// Starts a worker in the place of each that exited by itself; pushes why each exited,
    /// and any start that failed, to `failures`.
    fn replace_exited(&mut self, failures: &mut Vec<String>) {
        for reason in self.exited() {
            failures.push(reason);
            if let Err(e) = self.spawn() {
                failures.push(e);
            }
        }
    }

    /// Kills worker `id` ([`kill`](Self::kill)) and starts another in its place; pushes a
    /// start that failed to `failures`.
    fn replace(&mut self, id: u64, failures: &mut Vec<String>) {
        self.kill(id);
        if let Err(e) = self.spawn() {
            failures.push(e);
        }
    }
}

/// Workers that are processes of this program, in the role `worker`.
#[derive(Debug)]
pub struct ProcessPool {
    target: Target,
    concurrency: usize,
    log: PathBuf,
    folder: PathBuf,
    next: u64,
    seed: u64,
    sabotage: Sabotage,
    error_timeout: Option<Duration>,
    limit: Option<u32>,
    groups: bool,
    running: Vec<(u64, Child)>,
}

impl ProcessPool {
    /// A pool whose workers handle `target`'s queue, `concurrency` messages at once, appending
    /// to `log`, with `sabotage`'s faults; their output goes to `worker-<id>.log` in `folder`.
    pub fn new(
        target: Target,
        concurrency: usize,
        log: &Path,
        folder: &Path,
        seed: u64,
        sabotage: Sabotage,
    ) -> Self {
        ProcessPool {
            target,
            concurrency,
            log: log.to_path_buf(),
            folder: folder.to_path_buf(),
            next: 0,
            seed,
            sabotage,
            error_timeout: None,
            limit: None,
            groups: false,
            running: Vec::new(),
        }
    }

    /// Gives the workers' dispatchers this temporary-error timeout.
    pub fn error_timeout(mut self, timeout: Duration) -> Self {
        self.error_timeout = Some(timeout);
        self
    }

    /// Has the workers declare this concurrency limit on the run's job type.
    pub fn limited(mut self, limit: Option<u32>) -> Self {
        self.limit = limit;
        self
    }

    /// Has the workers handle the batches and chains of a `groups` run.
    pub fn groups(mut self, groups: bool) -> Self {
        self.groups = groups;
        self
    }

    fn signal(&self, id: u64, signal: Signal) {
        if let Some((_, child)) = self.running.iter().find(|(i, _)| *i == id) {
            let pid = Pid::from_raw(i32::try_from(child.id()).expect("a pid fits in i32"));
            let _ = kill(pid, signal);
        }
    }
}

impl Workers for ProcessPool {
    fn spawn(&mut self) -> Result<(), String> {
        self.next += 1;
        let id = self.next;
        let output = File::create(self.output_of(id).expect("processes have output"))
            .map_err(|e| format!("cannot create a worker's output file: {e}"))?;
        let program = std::env::current_exe()
            .map_err(|e| format!("cannot find this program to start a worker: {e}"))?;
        let child = Command::new(program)
            .arg("worker")
            .args(["--driver", self.target.kind.name()])
            .args(["--endpoint", &self.target.endpoint])
            .args(["--queue", &self.target.queue])
            .arg("--visibility")
            .arg(format!("{}ms", self.target.visibility.as_millis()))
            .args(["--concurrency", &self.concurrency.to_string()])
            .arg("--log")
            .arg(&self.log)
            .args(["--seed", &(self.seed ^ id).to_string()])
            .args(
                self.limit
                    .map(|n| ["--limit".to_owned(), n.to_string()])
                    .into_iter()
                    .flatten(),
            )
            .args(self.sabotage.to_args())
            .args(self.groups.then_some("--groups"))
            .args(
                self.target
                    .store
                    .iter()
                    .flat_map(|store| ["--store", store.as_str()]),
            )
            .args(
                self.error_timeout
                    .map(|t| ["--error-timeout".to_owned(), format!("{}ms", t.as_millis())])
                    .into_iter()
                    .flatten(),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(output)
            .spawn()
            .map_err(|e| format!("cannot start a worker: {e}"))?;
        self.running.push((id, child));
        Ok(())
    }

    fn ids(&self) -> Vec<u64> {
        self.running.iter().map(|(id, _)| *id).collect()
    }

    fn name_of(&self, id: u64) -> Option<String> {
        let (_, child) = self.running.iter().find(|(i, _)| *i == id)?;
        Some(child.id().to_string())
    }

    fn kill(&mut self, id: u64) {
        if let Some(at) = self.running.iter().position(|(i, _)| *i == id) {
            let (_, mut child) = self.running.remove(at);
            let _ = child.kill(); // SIGKILL
            let _ = child.wait();
        }
    }

    fn freeze(&mut self, id: u64, frozen: bool) {
        self.signal(
            id,
            if frozen {
                Signal::SIGSTOP
            } else {
                Signal::SIGCONT
            },
        );
    }

    fn exited(&mut self) -> Vec<String> {
        let mut reasons = Vec::new();
        self.running
            .retain_mut(|(id, child)| match child.try_wait() {
                Ok(None) => true,
                Ok(Some(status)) => {
                    reasons.push(format!(
                        "worker {id} (pid {}) exited by itself: {status}",
                        child.id()
                    ));
                    false
                }
                Err(e) => {
                    reasons.push(format!("worker {id} cannot be watched: {e}"));
                    false
                }
            });
        reasons
    }

    fn stop(&mut self, timeout: Duration) -> Vec<String> {
        for id in self.ids() {
            self.signal(id, Signal::SIGCONT);
            self.signal(id, Signal::SIGTERM);
        }
        let deadline = Instant::now() + timeout;
        let mut problems = Vec::new();
        for (id, mut child) in self.running.drain(..) {
            loop {
                match child.try_wait() {
                    Ok(Some(status)) if status.success() => break,
                    Ok(Some(status)) => {
                        problems.push(format!("worker {id} stopped with {status}"));
                        break;
                    }
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Ok(None) => {
                        problems.push(format!("worker {id} did not stop within {timeout:?}"));
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Err(e) => {
                        problems.push(format!("worker {id} cannot be watched: {e}"));
                        break;
                    }
                }
            }
        }
        problems
    }

    fn output_of(&self, id: u64) -> Option<PathBuf> {
        Some(self.folder.join(format!("worker-{id}.log")))
    }
}

impl Drop for ProcessPool {
    fn drop(&mut self) {
        for (_, child) in &mut self.running {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Workers that are threads of this process, each with a runtime of its own, on one
/// [`MemoryDriver`]. Killing one drops its dispatcher in the middle of whatever it does;
/// freezing one blocks its runtime's only thread.
#[derive(Debug)]
pub struct ThreadPool {
    driver: MemoryDriver,
    concurrency: usize,
    log: PathBuf,
    next: u64,
    seed: u64,
    sabotage: Sabotage,
    limit: Option<u32>,
    groups: bool,
    running: Vec<ThreadWorker>,
}

#[derive(Debug)]
struct ThreadWorker {
    id: u64,
    kill: CancellationToken,
    stop: CancellationToken,
    frozen: Arc<AtomicBool>,
    thread: JoinHandle<Result<(), String>>,
}

impl ThreadPool {
    /// A pool whose workers handle `driver`'s queue, `concurrency` messages at once, appending
    /// to `log`, with `sabotage`'s losses (an exit would end this whole process).
    pub fn new(
        driver: MemoryDriver,
        concurrency: usize,
        log: &Path,
        seed: u64,
        sabotage: Sabotage,
    ) -> Self {
        let sabotage = Sabotage {
            sabotage_exit_after: None,
            ..sabotage
        };
        ThreadPool {
            driver,
            concurrency,
            log: log.to_path_buf(),
            next: 0,
            seed,
            sabotage,
            limit: None,
            groups: false,
            running: Vec::new(),
        }
    }

    /// Has the workers declare this concurrency limit on the run's job type.
    pub fn limited(mut self, limit: Option<u32>) -> Self {
        self.limit = limit;
        self
    }

    /// Has the workers handle the batches and chains of a `groups` run.
    pub fn groups(mut self, groups: bool) -> Self {
        self.groups = groups;
        self
    }
}

/// What a thread worker runs with.
struct ThreadSettings {
    concurrency: usize,
    limit: Option<u32>,
    sabotage: Sabotage,
}

fn run_thread_worker(
    driver: MemoryDriver,
    handlers: Handlers,
    settings: ThreadSettings,
    kill: CancellationToken,
    stop: CancellationToken,
) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let mut dispatcher = Dispatcher::new(driver).concurrency(settings.concurrency);
        handlers.register(&mut dispatcher, settings.limit, settings.sabotage)?;
        let graceful = dispatcher.cancellation_token();
        tokio::spawn(async move {
            stop.cancelled().await;
            graceful.cancel();
        });
        tokio::select! {
            result = dispatcher.handle(&[]) => result.map_err(|e| e.to_string()),
            () = kill.cancelled() => Ok(()),
        }
    })
}

impl Workers for ThreadPool {
    fn spawn(&mut self) -> Result<(), String> {
        self.next += 1;
        let id = self.next;
        let frozen = Arc::new(AtomicBool::new(false));
        let (name, seed) = (format!("thread-{id}"), self.seed ^ id);
        let handlers = if self.groups {
            GroupLog::new(&self.log, name, seed, self.sabotage).map(Handlers::Groups)
        } else {
            SoakHandler::new(&self.log, name, seed).map(|handler| {
                Handlers::Checked(handler.freezable(frozen.clone()).sabotaged(self.sabotage))
            })
        }
        .map_err(|e| format!("cannot open the log: {e}"))?;
        let (kill, stop) = (CancellationToken::new(), CancellationToken::new());
        let driver = self.driver.reopen();
        let settings = ThreadSettings {
            concurrency: self.concurrency,
            limit: self.limit,
            sabotage: self.sabotage,
        };
        let thread = std::thread::Builder::new()
            .name(format!("worker-{id}"))
            .spawn({
                let (kill, stop) = (kill.clone(), stop.clone());
                move || run_thread_worker(driver, handlers, settings, kill, stop)
            })
            .map_err(|e| format!("cannot start a worker thread: {e}"))?;
        self.running.push(ThreadWorker {
            id,
            kill,
            stop,
            frozen,
            thread,
        });
        Ok(())
    }

    fn ids(&self) -> Vec<u64> {
        self.running.iter().map(|w| w.id).collect()
    }

    fn name_of(&self, id: u64) -> Option<String> {
        self.running
            .iter()
            .any(|w| w.id == id)
            .then(|| format!("thread-{id}"))
    }

    fn kill(&mut self, id: u64) {
        if let Some(at) = self.running.iter().position(|w| w.id == id) {
            let worker = self.running.remove(at);
            worker.frozen.store(false, Ordering::SeqCst);
            worker.kill.cancel();
            let _ = worker.thread.join();
        }
    }

    fn freeze(&mut self, id: u64, frozen: bool) {
        if let Some(worker) = self.running.iter().find(|w| w.id == id) {
            worker.frozen.store(frozen, Ordering::SeqCst);
        }
    }

    fn exited(&mut self) -> Vec<String> {
        let (done, running): (Vec<_>, Vec<_>) = std::mem::take(&mut self.running)
            .into_iter()
            .partition(|w| w.thread.is_finished());
        self.running = running;
        done.into_iter()
            .map(|w| match w.thread.join() {
                Ok(Ok(())) => format!("worker {} returned by itself", w.id),
                Ok(Err(e)) => format!("worker {} stopped with an error: {e}", w.id),
                Err(_) => format!("worker {} panicked", w.id),
            })
            .collect()
    }

    fn stop(&mut self, timeout: Duration) -> Vec<String> {
        for worker in &self.running {
            worker.frozen.store(false, Ordering::SeqCst);
            worker.stop.cancel();
        }
        let deadline = Instant::now() + timeout;
        let mut problems = Vec::new();
        for worker in self.running.drain(..) {
            while !worker.thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if !worker.thread.is_finished() {
                worker.kill.cancel();
                problems.push(format!(
                    "worker {} did not stop within {timeout:?}",
                    worker.id
                ));
            }
            match worker.thread.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => problems.push(format!("worker {} stopped with: {e}", worker.id)),
                Err(_) => problems.push(format!("worker {} panicked", worker.id)),
            }
        }
        problems
    }
}

/// A memory driver's queue is empty when nothing waits, is delayed or is claimed; the run
/// checks with `receive` like every other backend.
pub fn memory_driver(target: &Target) -> Result<MemoryDriver, String> {
    let mut options = hermes_testkit::MemoryOptions::default();
    options.queue.clone_from(&target.queue);
    options.visibility_timeout = target.visibility;
    let driver = MemoryDriver::with_options(options).map_err(|e| e.to_string())?;
    driver
        .setup_priority_queue(&target.high_queue(), crate::target::PRIORITY_HIGH)
        .map_err(|e| e.to_string())?;
    Ok(driver)
}
