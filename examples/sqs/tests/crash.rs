//! A worker killed with SIGKILL in the middle of a handler: SQS shows the export again once its
//! visibility timeout (2 s here) runs out, and the next worker runs it; every other export runs
//! exactly once and nothing is lost. Runs against the server at `HERMES_SQS_ENDPOINT`.

use std::collections::HashMap;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use hermes_core::{DEFAULT_PRIORITY, Driver, SharedFileShutdown, Shutdown};
use hermes_example_common::testing::{
    assert_each_exported_once, crash_test_reports, exits_cleanly, exported, slow_export,
    start_worker,
};
use hermes_example_sqs::client;
use hermes_sqs::SqsDriver;
use hermes_sqs::aws_sdk_sqs::types::QueueAttributeName;

fn worker(dir: &Path, queue: &str) -> Child {
    start_worker(
        env!("CARGO_BIN_EXE_sqs-worker"),
        dir,
        &[("HERMES_SQS_QUEUE", queue)],
    )
}

/// How many messages of the queue at `url` are taken and not yet deleted.
async fn in_flight(client: &hermes_sqs::aws_sdk_sqs::Client, url: &str) -> i64 {
    let attributes = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .expect("the queue's attributes");
    attributes
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_handler_loses_nothing() {
    let queue = format!("crash-{}", std::process::id());
    let dir = std::env::temp_dir().join(&queue);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Only ever a local server.
    let endpoint = std::env::var("HERMES_SQS_ENDPOINT").unwrap_or_default();
    assert!(
        endpoint.is_empty()
            || ["http://127.0.0.1:", "http://localhost:", "http://[::1]:"]
                .iter()
                .any(|p| endpoint.starts_with(p)),
        "HERMES_SQS_ENDPOINT must be a loopback http:// address for this test, not {endpoint}"
    );
    let client = client().await;
    // The queue is created here with a 2 s visibility timeout; the workers find it.
    let visibility = HashMap::from([(QueueAttributeName::VisibilityTimeout, "2".to_owned())]);
    let emitter = SqsDriver::new(client.clone(), &queue, visibility).unwrap();
    let url = emitter.queue_url(DEFAULT_PRIORITY).await.unwrap();
    let send = async |report: &str, seconds: u64| {
        let m = slow_export(report, seconds);
        emitter.send(&m, DEFAULT_PRIORITY).await.unwrap();
    };

    // The first worker takes the slow export and is killed inside its handler.
    send("slow", 3).await;
    let mut first = worker(&dir, &queue);
    let give_up = Instant::now() + Duration::from_secs(30);
    while in_flight(&client, &url).await != 1 {
        assert!(Instant::now() < give_up, "the slow export was not taken");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reports = crash_test_reports();
    for (report, seconds) in reports.iter().filter(|(r, _)| r != "slow") {
        send(report, *seconds).await;
    }
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    assert!(exported(&dir).is_empty(), "the slow export never finished");

    let mut second = worker(&dir, &queue);
    assert_each_exported_once(&dir, &reports, Duration::from_secs(90));

    SharedFileShutdown::new(dir.join("shutdown"))
        .shutdown(None)
        .await
        .unwrap();
    assert!(exits_cleanly(&mut second, Duration::from_secs(10)));
    for name in [queue.clone(), format!("{queue}_high")] {
        if let Ok(found) = client.get_queue_url().queue_name(&name).send().await
            && let Some(url) = found.queue_url()
        {
            let _ = client.delete_queue().queue_url(url).send().await;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
