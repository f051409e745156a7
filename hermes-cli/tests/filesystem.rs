//! The `hermes` command on the filesystem driver: each command's output, and its effect seen
//! through the driver.

mod common;

use std::process::{Command, Output};
use std::time::Duration;

use hermes::fs::FileSystemDriver;
use hermes_core::inspect::QueueState;
use hermes_core::{DEFAULT_PRIORITY, Driver, Message};

struct Queue {
    dir: std::path::PathBuf,
}

impl Queue {
    fn new(name: &str) -> Queue {
        let dir = std::env::temp_dir().join(format!(
            "hermes-cli-{name}-{}-{:08x}",
            std::process::id(),
            rand_u32()
        ));
        Queue { dir }
    }

    fn url(&self) -> String {
        format!("file://{}?queue=jobs", self.dir.display())
    }

    fn driver(&self) -> FileSystemDriver {
        FileSystemDriver::from_url(&self.url()).unwrap()
    }

    fn hermes(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_hermes"))
            .env("HERMES_URL", self.url())
            .args(args)
            .output()
            .expect("running hermes")
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn rand_u32() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    nanos ^ std::process::id().rotate_left(16)
}

use common::{json, ok};

#[tokio::test]
async fn emit_then_stats_as_table_and_json() {
    let queue = Queue::new("stats");
    let out = ok(&queue.hermes(&[
        "emit",
        "report.export",
        "--payload",
        r#"{"report":"sales"}"#,
        "--count",
        "2",
    ]));
    let ids: Vec<&str> = out.lines().collect();
    assert_eq!(ids.len(), 2, "{out}");
    ok(&queue.hermes(&["emit", "report.export", "--delay", "90s"]));

    let table = ok(&queue.hermes(&["stats"]));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "queue", "priority", "waiting", "delayed", "in", "flight", "dead", "latency"
        ]
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(&row[..6], ["jobs", "100", "2", "1", "0", "0"], "{table}");

    let stats = json(&queue.hermes(&["stats", "--json"]));
    assert_eq!(stats["driver"], "filesystem");
    let q = &stats["queues"][0];
    assert_eq!(
        (q["waiting"].as_u64(), q["delayed"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(q["in_flight"], 0);

    let driver = queue.driver();
    let peeked = driver
        .browse()
        .unwrap()
        .peek(DEFAULT_PRIORITY, QueueState::Waiting, 10)
        .await
        .unwrap();
    let mut peeked_ids: Vec<_> = peeked.iter().map(|m| m.id().to_owned()).collect();
    peeked_ids.sort();
    let mut sent: Vec<_> = ids.iter().map(|s| (*s).to_owned()).collect();
    sent.sort();
    assert_eq!(peeked_ids, sent, "the printed ids are what was queued");
    assert_eq!(peeked[0].payload().unwrap()["report"], "sales");
}

#[tokio::test]
async fn peek_lists_without_taking_and_purge_needs_yes() {
    let queue = Queue::new("peek");
    let driver = queue.driver();
    let message = Message::builder("t").id("m-1").build().unwrap();
    driver.send(&message, DEFAULT_PRIORITY).await.unwrap();

    let listed = json(&queue.hermes(&["peek", "--json"]));
    assert_eq!(listed[0]["id"], "m-1");
    assert!(ok(&queue.hermes(&["peek"])).contains("m-1"));
    let refused = queue.hermes(&["purge", "--state", "waiting"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--yes"));
    let still = driver.receive(&[], Duration::ZERO).await.unwrap().unwrap();
    assert_eq!(
        still.message().id(),
        "m-1",
        "neither peek nor a refused purge took it"
    );
    driver.nack(&still).await.unwrap();

    assert!(ok(&queue.hermes(&["purge", "--state", "waiting", "--yes"])).contains("purged 1"));
    assert!(driver.receive(&[], Duration::ZERO).await.unwrap().is_none());
}

#[tokio::test]
async fn dead_letters_are_listed_shown_replayed_and_purged() {
    let queue = Queue::new("dead");
    let target = common::Target {
        url: queue.url(),
        env: Vec::new(),
        driver: std::sync::Arc::new(queue.driver()),
    };
    common::dead_letters_round_trip(&target, "d-1").await;
    assert_eq!(target.hermes(&["dead", "replay"]).status.code(), Some(2));
}

#[test]
fn bad_input_is_one_line_and_a_usage_error() {
    let queue = Queue::new("usage");
    for (args, says) in [
        (vec!["emit", "t", "--payload", "{not json"], "not JSON"),
        (
            vec!["emit", "t", "--payload", "\"text\""],
            "object or array",
        ),
        (vec!["peek", "--priority", "7"], "unknown priority 7"),
    ] {
        let out = queue.hermes(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_hermes"))
        .args(["--url", "nats://guest:secret@127.0.0.1/?queue=q", "stats"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("secret"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_hermes"))
        .args(["--url", "file:///tmp", "frobnicate"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "clap's usage errors");
}

/// A configuration file gives the URL and the priority queues; `--url` and `--priority` add to
/// it or override it.
#[tokio::test]
async fn a_configuration_file_names_the_queue_and_its_priorities() {
    let queue = Queue::new("config");
    std::fs::create_dir_all(&queue.dir).unwrap();
    let config = queue.dir.join("hermes.toml");
    std::fs::write(
        &config,
        format!(
            "url = \"{}\"\n\n[priorities]\njobs_high = 200\n",
            queue.url()
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hermes"))
            .env_remove("HERMES_URL")
            .arg("--config")
            .arg(&config)
            .args(args)
            .output()
            .unwrap()
    };
    ok(&run(&["emit", "urgent", "--priority", "200"]));
    let stats = json(&run(&["stats", "--json"]));
    let names: Vec<&str> = stats["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["jobs_high", "jobs"]);
    assert_eq!(stats["queues"][0]["waiting"], 1);
    let driver = queue.driver();
    hermes_core::QueueConfig::load(&config)
        .unwrap()
        .setup(&driver)
        .unwrap();
    let got = driver
        .receive(&[200], Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        got.message().message_type(),
        "urgent",
        "the worker loads the same file"
    );

    std::fs::write(&config, "url = \"file:///x\npriorities = 1\n").unwrap();
    let out = run(&["stats"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("hermes.toml") && err.contains("line 1"),
        "{err}"
    );
}

#[tokio::test]
async fn workers_are_listed_on_the_filesystem() {
    let queue = Queue::new("workers");
    let target = common::Target {
        url: queue.url(),
        env: Vec::new(),
        driver: std::sync::Arc::new(queue.driver()),
    };
    common::workers_are_listed(&target).await;
    assert!(queue.dir.join("workers").is_dir(), "beside the queues");
}

/// `workers stop` signals the shutdown file the workers watch, as `shutdown` does: a running
/// dispatcher stops, and the message it had not taken yet stays queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_stop_stops_a_running_worker() {
    let queue = Queue::new("workers-stop");
    let driver = queue.driver();
    let mut dispatcher = hermes_core::Dispatcher::new(driver.clone()).with_shutdown(
        hermes_core::SharedFileShutdown::new(driver.directory().join("shutdown")),
    );
    dispatcher.register_fn("t", |_m| async { Ok(true) });
    let token = dispatcher.cancellation_token();
    let worker = tokio::spawn(async move { dispatcher.handle(&[]).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!worker.is_finished(), "the worker waits for messages");

    let out = common::ok(&queue.hermes(&["workers", "stop"]));
    assert!(out.contains("shutdown signalled"), "{out}");
    let stopped = tokio::time::timeout(Duration::from_secs(10), worker).await;
    token.cancel();
    stopped
        .expect("the worker stopped after `workers stop`")
        .unwrap()
        .unwrap();
    driver
        .send(&Message::new("t"), DEFAULT_PRIORITY)
        .await
        .unwrap();
    assert_eq!(
        driver.inspect().unwrap().stats().await.unwrap()[0]
            .waiting
            .value(),
        Some(1),
        "nothing handles it now"
    );
}

/// `cron ls` lists the entries a running worker's scheduler announces, with the next tick and
/// the last one it emitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_ls_lists_a_running_workers_entries() {
    use hermes_core::cron::CronSchedule;
    use hermes_core::{CatchUp, CronEntry, Emitter, Scheduler};

    let queue = Queue::new("cron-ls");
    let driver = queue.driver();
    let scheduler = Scheduler::new(Emitter::new(driver.clone())).catch_up(CatchUp::None);
    scheduler
        .add(CronEntry::new(
            "every-second",
            CronSchedule::new("* * * * * *", "Europe/Bratislava").unwrap(),
            "tick",
        ))
        .unwrap();
    scheduler
        .add(CronEntry::new(
            "nightly-export",
            CronSchedule::new("0 3 * * *", "UTC").unwrap(),
            "report.export",
        ))
        .unwrap();
    let mut options = hermes_core::DispatcherOptions::default();
    options.announce_ttl = Some(Duration::from_secs(3));
    let mut dispatcher = hermes_core::Dispatcher::new(driver.clone())
        .options(options)
        .with_scheduler(scheduler);
    dispatcher.register_fn("tick", |_m| async { Ok(true) });
    let token = dispatcher.cancellation_token();
    let worker = tokio::spawn(async move { dispatcher.handle(&[]).await });
    // Two announcements: the second knows a tick the scheduler emitted.
    tokio::time::sleep(Duration::from_millis(2_300)).await;

    let listed = common::json(&queue.hermes(&["cron", "ls", "--json"]));
    let entries = listed.as_array().expect("a list");
    assert_eq!(entries.len(), 2, "{listed}");
    let every = &entries[0];
    assert_eq!(every["name"], "every-second");
    assert_eq!(every["schedule"], "* * * * * *");
    assert_eq!(every["zone"], "Europe/Bratislava");
    assert_eq!(every["type"], "tick");
    assert_eq!(every["workers"], 1);
    let now = hermes_core::time::unix_now();
    let next = every["next"].as_f64().expect("a next tick");
    let previous = every["previous"].as_f64().expect("a previous tick");
    assert!(next > previous && next - now < 5.0, "{every}");
    assert_eq!(entries[1]["name"], "nightly-export");
    assert!(entries[1]["previous"].is_null(), "not run yet: {listed}");

    let table = common::ok(&queue.hermes(&["cron", "ls"]));
    assert!(
        table.contains("every-second") && table.contains("0 3 * * *"),
        "{table}"
    );
    token.cancel();
    worker.await.unwrap().unwrap();
    let after = common::ok(&queue.hermes(&["cron", "ls"]));
    assert!(
        after.contains("no running worker"),
        "gone with its worker: {after}"
    );
}

#[tokio::test]
async fn sealed_payloads_show_as_sealed_unless_the_keys_are_given() {
    use hermes::seal::SealKey;

    let queue = Queue::new("sealed");
    let key = SealKey::generate("2026-12").unwrap();
    let keys = format!("2026-12:{}", *key.to_base64());
    let emitted = Command::new(env!("CARGO_BIN_EXE_hermes"))
        .env("HERMES_URL", queue.url())
        .env("HERMES_SEAL_KEYS", &keys)
        .args([
            "emit",
            "send-email",
            "--payload",
            r#"{"to":"someone@example.com"}"#,
        ])
        .output()
        .unwrap();
    ok(&emitted);
    let on_disk: String = walk(&queue.dir);
    assert!(
        !on_disk.contains("someone@example.com"),
        "the payload is sealed on disk"
    );

    let shown = json(&queue.hermes(&["peek", "--json"]));
    let payload = shown[0]["payload"].as_str().unwrap_or_default().to_owned();
    assert!(
        payload.contains("sealed with the key \"2026-12\""),
        "{shown}"
    );
    let opened = Command::new(env!("CARGO_BIN_EXE_hermes"))
        .env("HERMES_URL", queue.url())
        .env("HERMES_SEAL_KEYS", &keys)
        .args(["peek", "--json"])
        .output()
        .unwrap();
    let opened = json(&opened);
    assert_eq!(
        opened[0]["payload"]["to"], "someone@example.com",
        "{opened}"
    );

    let refused = Command::new(env!("CARGO_BIN_EXE_hermes"))
        .env("HERMES_URL", queue.url())
        .env("HERMES_SEAL_KEYS", "2026-12:c2hvcnQ=")
        .args(["peek"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("not 32") && !stderr.contains("c2hvcnQ="),
        "{stderr}"
    );
}

/// Every file's text under `dir`.
fn walk(dir: &std::path::Path) -> String {
    let mut all = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            all.push_str(&walk(&path));
        } else {
            all.push_str(&String::from_utf8_lossy(
                &std::fs::read(&path).unwrap_or_default(),
            ));
        }
    }
    all
}

#[tokio::test]
async fn pause_resume_and_cancel_change_what_the_workers_read() {
    use hermes_core::flow::PauseTarget;

    let queue = Queue::new("controls");
    ok(&queue.hermes(&["pause"]));
    ok(&queue.hermes(&["pause", "--type", "send-email"]));
    let driver = queue.driver();
    let controls = driver.controls().expect("the controls facet");
    assert_eq!(
        controls.paused().await.unwrap(),
        [
            PauseTarget::Priority(DEFAULT_PRIORITY),
            PauseTarget::Type("send-email".into())
        ]
    );
    let listed = json(&queue.hermes(&["paused", "--json"]));
    assert_eq!(
        listed["paused"],
        serde_json::json!(["priority:100", "type:send-email"])
    );
    let stats = json(&queue.hermes(&["stats", "--json"]));
    assert_eq!(stats["paused"].as_array().map(Vec::len), Some(2));
    assert!(ok(&queue.hermes(&["stats"])).contains("paused: priority:100, type:send-email"));

    assert!(ok(&queue.hermes(&["resume"])).contains("resumed priority:100"));
    assert!(ok(&queue.hermes(&["resume"])).contains("was not paused"));
    assert_eq!(
        controls.paused().await.unwrap(),
        [PauseTarget::Type("send-email".into())]
    );

    ok(&queue.hermes(&["cancel", "job-1", "job-2", "--by", "ops"]));
    let cancelled = controls.cancellations(0.0).await.unwrap();
    let ids: Vec<&str> = cancelled.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["job-1", "job-2"]);
    assert!(cancelled.iter().all(|c| c.by == "ops"));

    let both = queue.hermes(&["pause", "--priority", "5", "--type", "x"]);
    assert_eq!(both.status.code(), Some(2), "a usage error");
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Count {
    n: u32,
}
impl hermes_core::Job for Count {
    const TYPE: &'static str = "count";
}
impl hermes_core::tracking::Step for Count {
    type Output = Count;
}

#[tokio::test]
async fn job_batch_and_workflow_show_what_became_of_them() {
    use hermes_core::tracking::{Batch, Chain};
    use hermes_core::{Dispatcher, Emitter, JobContext};

    let queue = Queue::new("tracking");
    let emitter = Emitter::new(queue.driver());
    let batch = emitter
        .emit_batch_of(
            Batch::new().description("three counts"),
            &[Count { n: 1 }, Count { n: 2 }, Count { n: 0 }],
        )
        .await
        .unwrap();
    let chain = Chain::new(&Count { n: 5 })
        .and_then(|c| c.then::<Count>())
        .unwrap();
    let workflow = emitter.emit_workflow(chain.workflow()).await.unwrap();
    let mut dispatcher = Dispatcher::new(queue.driver()).max_items(5);
    dispatcher.register_step(|job: Count, _ctx: JobContext| async move {
        if job.n == 0 {
            return Err("zero cannot be counted".to_owned());
        }
        Ok(Count { n: job.n + 1 })
    });
    dispatcher.handle(&[]).await.unwrap();

    let shown = json(&queue.hermes(&["batch", &batch, "--json"]));
    assert_eq!(
        (
            &shown["total"],
            &shown["succeeded"],
            &shown["failed"],
            &shown["pending"]
        ),
        (&3.into(), &2.into(), &1.into(), &0.into()),
        "{shown}"
    );
    let lines = ok(&queue.hermes(&["batch", &batch]));
    assert!(
        lines.contains("three counts") && lines.contains("done"),
        "{lines}"
    );

    let shown = ok(&queue.hermes(&["workflow", &workflow]));
    assert!(shown.contains("succeeded"), "{shown}");
    let last = format!("{workflow}.2");
    let job = ok(&queue.hermes(&["job", &last]));
    assert!(
        job.contains("succeeded") && job.contains("bytes (--result prints it)"),
        "{job}"
    );
    let job = ok(&queue.hermes(&["job", &last, "--result"]));
    assert!(job.contains("\"n\": 7"), "{job}");
    let record = json(&queue.hermes(&["job", &last, "--json"]));
    assert_eq!(record["result"], serde_json::json!({"n": 7}));

    let missing = queue.hermes(&["job", "no-such-job"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no record of job no-such-job"));
}

/// `hermes cron run NAME` emits the entry's message, as the workers announce it, at once.
#[tokio::test]
async fn cron_run_emits_an_entrys_message_now() {
    let queue = Queue::new("cron-run");
    let driver = queue.driver();
    let refused = queue.hermes(&["cron", "run", "nightly-export"]);
    assert_eq!(refused.status.code(), Some(1), "no worker announces it");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("nightly-export"));

    let mut worker = hermes_core::workers::WorkerInfo::new(1, &[], Duration::from_secs(60));
    worker.schedules = vec![
        serde_json::from_value(serde_json::json!({
            "name": "nightly-export", "expression": "0 3 * * *", "zone": "UTC",
            "type": "report.export", "priority": 100, "next": null, "previous": null,
            "payload": { "report": "sales" }
        }))
        .unwrap(),
    ];
    let workers = driver.workers().unwrap();
    workers
        .announce(&worker, Duration::from_secs(60))
        .await
        .unwrap();
    let out = ok(&queue.hermes(&["cron", "run", "nightly-export"]));
    assert!(out.starts_with("emitted cron-nightly-export-now-"), "{out}");
    let delivery = driver
        .receive(&[], Duration::ZERO)
        .await
        .unwrap()
        .expect("the entry's message");
    assert_eq!(delivery.message().message_type(), "report.export");
    assert_eq!(
        delivery.message().payload(),
        Some(&serde_json::json!({ "report": "sales" }))
    );
}
