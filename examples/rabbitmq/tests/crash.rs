//! A worker killed with SIGKILL in the middle of a handler: the broker sees the connection go
//! and delivers the unacknowledged export again to the next worker; every other export runs
//! exactly once and nothing is lost. Runs against the broker at `HERMES_AMQP_URL`.

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use hermes_core::{DEFAULT_PRIORITY, Driver, SharedFileShutdown, Shutdown};
use hermes_example_common::testing::{
    assert_each_exported_once, crash_test_reports, exits_cleanly, exported, slow_export,
    start_worker, wait_until,
};

fn worker(dir: &Path, queue: &str) -> Child {
    start_worker(
        env!("CARGO_BIN_EXE_rabbitmq-worker"),
        dir,
        &[("HERMES_RABBITMQ_QUEUE", queue)],
    )
}

fn queue_depth(queue: &str) -> String {
    let output = Command::new("rabbitmqctl")
        .args(["-q", "list_queues", "name", "messages_unacknowledged"])
        .output()
        .expect("rabbitmqctl is installed with the broker");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{queue}\t")).map(str::to_owned))
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_handler_loses_nothing() {
    let queue = format!("crash-{}", std::process::id());
    let dir = std::env::temp_dir().join(&queue);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The emitter uses the same settings as the workers.
    let emitter = {
        let url = std::env::var("HERMES_AMQP_URL")
            .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
        hermes_rabbitmq::RabbitMqDriver::new(&url, &queue, Default::default()).unwrap()
    };
    let send = async |report: &str, seconds: u64| {
        let m = slow_export(report, seconds);
        emitter.send(&m, DEFAULT_PRIORITY).await.unwrap();
    };

    // The first worker takes the slow export and is killed inside its handler.
    send("slow", 3).await;
    let mut first = worker(&dir, &queue);
    wait_until(
        "the slow export to be taken",
        Duration::from_secs(30),
        || queue_depth(&queue) == "1",
    );
    let reports = crash_test_reports();
    for (report, seconds) in reports.iter().filter(|(r, _)| r != "slow") {
        send(report, *seconds).await;
    }
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    assert!(exported(&dir).is_empty(), "the slow export never finished");

    let mut second = worker(&dir, &queue);
    assert_each_exported_once(&dir, &reports, Duration::from_secs(60));

    SharedFileShutdown::new(dir.join("shutdown"))
        .shutdown(None)
        .await
        .unwrap();
    assert!(exits_cleanly(&mut second, Duration::from_secs(10)));
    let _ = Command::new("rabbitmqctl")
        .args(["-q", "delete_queue", &queue])
        .output();
    let _ = std::fs::remove_dir_all(&dir);
}
