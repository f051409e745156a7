//! Filesystem driver throughput beside a raw loop doing the same file operations, in one run:
//! emit (plain and durable), handle with a no-op handler at concurrency 1 and 8, and the drain
//! rate by backlog size (100, 10,000, 100,000 waiting files).
//!
//! `cargo bench -p hermes-fs --bench fs` (`HERMES_BENCH_DIR` picks the folder, default the
//! system temp folder; `HERMES_BENCH_MAX_BACKLOG` caps the largest backlog).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_core::{DEFAULT_PRIORITY, Driver, JsonSerializer, Message, Serializer};
use hermes_fs::{FileSystemDriver, FileSystemOptions};
use hermes_testkit::bench::{print_ratio, time_dispatch};

fn sample() -> Message {
    Message::builder("report.export")
        .payload(&serde_json::json!({"report": "sales", "user_id": 12345}))
        .build()
        .unwrap()
}

struct Bench {
    root: PathBuf,
    next: usize,
}

impl Bench {
    fn dir(&mut self) -> PathBuf {
        self.next += 1;
        let dir = self.root.join(format!("run-{}", self.next));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }
}

fn options(durable: bool) -> FileSystemOptions {
    let mut options = FileSystemOptions::default();
    options.durable = durable;
    options
}

/// The raw send: write a file in tmp/, rename it into new/ (and flush both when durable).
fn raw_send(dir: &Path, body: &[u8], n: usize, durable: bool) -> Duration {
    raw_send_from(dir, body, 0..n, durable)
}

fn raw_send_from(
    dir: &Path,
    body: &[u8],
    range: std::ops::Range<usize>,
    durable: bool,
) -> Duration {
    let (tmp, new) = (dir.join("q/tmp"), dir.join("q/new"));
    fs::create_dir_all(&tmp).unwrap();
    fs::create_dir_all(&new).unwrap();
    let start = Instant::now();
    for i in range {
        let name = format!("{:017.6}-{i:016x}.json", 1_700_000_000.0 + i as f64 * 1e-6);
        let mut file = fs::File::create_new(tmp.join(&name)).unwrap();
        file.write_all(body).unwrap();
        if durable {
            file.sync_all().unwrap();
        }
        drop(file);
        fs::rename(tmp.join(&name), new.join(&name)).unwrap();
        if durable {
            fs::File::open(&new).unwrap().sync_all().unwrap();
        }
    }
    start.elapsed()
}

/// The raw drain: list new/ once, then per file rename into processing/, read, delete.
fn raw_drain(dir: &Path) -> (usize, Duration) {
    let (new, processing) = (dir.join("q/new"), dir.join("q/processing"));
    fs::create_dir_all(&processing).unwrap();
    let start = Instant::now();
    let mut names: Vec<_> = fs::read_dir(&new)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    for name in &names {
        let claimed = processing.join(name);
        fs::rename(new.join(name), &claimed).unwrap();
        let body = fs::read(&claimed).unwrap();
        JsonSerializer.deserialize(&body).unwrap();
        fs::remove_file(&claimed).unwrap();
    }
    (names.len(), start.elapsed())
}

/// Emit and the raw send in alternating rounds, so the disk's ups and downs hit both alike.
async fn emit_beside_raw(
    bench: &mut Bench,
    body: &[u8],
    n: usize,
    durable: bool,
) -> (Duration, Duration) {
    const ROUNDS: usize = 10;
    let (raw_dir, dir) = (bench.dir(), bench.dir());
    let driver = FileSystemDriver::with_options(&dir, "q", options(durable)).unwrap();
    let message = sample();
    let (mut ours, mut raw) = (Duration::ZERO, Duration::ZERO);
    let chunk = n / ROUNDS;
    for round in 0..ROUNDS {
        raw += raw_send_from(&raw_dir, body, round * chunk..(round + 1) * chunk, durable);
        let start = Instant::now();
        for _ in 0..chunk {
            driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
        }
        ours += start.elapsed();
    }
    (ours, raw)
}

async fn emit(dir: &Path, n: usize, durable: bool) -> Duration {
    let driver = FileSystemDriver::with_options(dir, "q", options(durable)).unwrap();
    let message = sample();
    let start = Instant::now();
    for _ in 0..n {
        driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    }
    start.elapsed()
}

async fn drain(dir: &Path, n: usize) -> Duration {
    let driver = FileSystemDriver::with_options(dir, "q", options(false)).unwrap();
    let start = Instant::now();
    for _ in 0..n {
        let d = driver
            .receive(&[], Duration::ZERO)
            .await
            .unwrap()
            .expect("a message");
        driver.ack(&d).await.unwrap();
    }
    start.elapsed()
}

async fn dispatch(dir: &Path, n: usize, concurrency: usize) -> Duration {
    let driver = Arc::new(FileSystemDriver::with_options(dir, "q", options(false)).unwrap());
    time_dispatch(driver, "report.export", concurrency, n).await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let root = std::env::var_os("HERMES_BENCH_DIR").map_or_else(
        || std::env::temp_dir().join("hermes-fs-bench"),
        PathBuf::from,
    );
    let max_backlog: usize = std::env::var("HERMES_BENCH_MAX_BACKLOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let mut bench = Bench {
        root: root.clone(),
        next: 0,
    };
    let body = JsonSerializer.serialize(&sample()).unwrap();
    println!("hermes-fs bench in {}", root.display());

    let n = 20_000;
    let (ours, raw) = emit_beside_raw(&mut bench, &body, n, false).await;
    print_ratio("emit", n, ours, raw);

    let durable_n = 1_000;
    let (ours, raw) = emit_beside_raw(&mut bench, &body, durable_n, true).await;
    print_ratio("emit, durable (fsync file + folder)", durable_n, ours, raw);

    for concurrency in [1, 8] {
        let raw_dir = bench.dir();
        raw_send(&raw_dir, &body, n, false);
        let (_, raw) = raw_drain(&raw_dir);
        let dir = bench.dir();
        emit(&dir, n, false).await;
        let ours = dispatch(&dir, n, concurrency).await;
        print_ratio(
            &format!("handle, dispatcher concurrency {concurrency}"),
            n,
            ours,
            raw,
        );
    }

    for backlog in [100, 10_000, 100_000]
        .into_iter()
        .filter(|b| *b <= max_backlog)
    {
        let raw_dir = bench.dir();
        raw_send(&raw_dir, &body, backlog, false);
        let (_, raw) = raw_drain(&raw_dir);
        let dir = bench.dir();
        emit(&dir, backlog, false).await;
        let ours = drain(&dir, backlog).await;
        print_ratio(
            &format!("drain a backlog of {backlog} (receive + ack)"),
            backlog,
            ours,
            raw,
        );
    }
    let _ = fs::remove_dir_all(&root);
}
