//! The `hermes` command on RabbitMQ: the table and JSON outputs, each command's effect seen
//! through the driver, the shutdown file, and a broker that does not answer.

mod common;

use std::sync::Arc;

use common::{Target, dead_letters_round_trip, emit_stats_and_purge, ok};
use hermes::rabbitmq::RabbitMqDriver;

fn amqp_url() -> String {
    std::env::var("HERMES_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

fn target(queue: &str) -> Target {
    let url = format!("{}?queue={queue}&prefetch=2", amqp_url());
    Target {
        driver: Arc::new(RabbitMqDriver::from_url(&url).unwrap()),
        url,
        env: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emit_stats_and_purge_on_rabbitmq() {
    let queue = hermes_testkit::suite::unique_queue_name("cli-stats");
    emit_stats_and_purge(&target(&queue)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_round_trip_on_rabbitmq() {
    let queue = hermes_testkit::suite::unique_queue_name("cli-dead");
    dead_letters_round_trip(&target(&queue), "d-1").await;
}

/// RabbitMQ has no shared key: `shutdown` asks for the workers' file, and writes it.
#[test]
fn shutdown_needs_the_workers_file() {
    let target = target("cli-shutdown");
    let refused = target.hermes(&["shutdown"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--file"));
    let file = std::env::temp_dir().join(format!("hermes-cli-shutdown-{}", std::process::id()));
    ok(&target.hermes(&["shutdown", "--file", file.to_str().unwrap()]));
    assert!(file.exists(), "the SharedFileShutdown file");
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn a_broker_that_does_not_answer_fails_in_time() {
    let port = common::silent_port();
    common::unanswered_backend_fails_in_time(
        &format!("amqp://guest:hunter2@127.0.0.1:{port}/%2f?queue=q"),
        &[],
        "hunter2",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_has_no_live_workers_and_says_so() {
    let queue = hermes_testkit::suite::unique_queue_name("cli-workers");
    let target = target(&queue);
    // A receive starts this driver's consumer, which the broker then counts.
    assert!(
        target
            .driver
            .receive(&[], std::time::Duration::from_millis(200))
            .await
            .unwrap()
            .is_none()
    );
    let stats = target.driver.inspect().unwrap().stats().await.unwrap();
    assert!(
        stats
            .iter()
            .any(|q| q.consumers == hermes_core::inspect::Figure::Exact(1)),
        "{stats:?}"
    );
    common::workers_are_listed(&target).await;
}
