//! Publisher confirms: a message the broker refuses (a nack) fails its own `send`, and in a
//! batch only the refused messages fail; nothing refused is reported as sent, nothing sent is
//! lost. The broker refuses through a policy capping the queue at one message with
//! `overflow: reject-publish`, on classic and on quorum queues.

mod common;

use std::time::Duration;

use common::{CLASSIC, QUORUM, RabbitHarness, rabbitmqctl, ready};
use hermes_core::{DEFAULT_PRIORITY, Driver, Message};
use hermes_testkit::suite::{Harness, available_or_skip, strict, unique_queue_name};

/// Caps the queue `queue` at one message, refusing publishes beyond it, until dropped.
struct FullAtOne {
    policy: String,
}

impl FullAtOne {
    fn on(queue: &str) -> Self {
        let policy = format!("{queue}-full");
        rabbitmqctl(&[
            "set_policy",
            "--apply-to",
            "queues",
            "--priority",
            "100",
            &policy,
            &format!("^{queue}$"),
            r#"{"max-length":1,"overflow":"reject-publish"}"#,
        ]);
        FullAtOne { policy }
    }
}

impl Drop for FullAtOne {
    fn drop(&mut self) {
        rabbitmqctl(&["clear_policy", &self.policy]);
    }
}

/// With `batch`, also a batch: a quorum queue notices that it is full only after a batch's
/// pipelined publishes, so it refuses the message sent after the batch instead.
async fn a_nack_fails_only_the_refused_messages(harness: &RabbitHarness, name: &str, batch: bool) {
    if !available_or_skip(strict(), name, harness.available().await) {
        return;
    }
    let queue = unique_queue_name(name);
    let _full = FullAtOne::on(&queue);
    let driver = harness.open(&queue).await.unwrap();

    // One by one until the broker refuses one (a quorum queue notices that it is full a
    // message late).
    let mut accepted = Vec::new();
    let refused = loop {
        let message = Message::new("t");
        match driver.send(&message, DEFAULT_PRIORITY).await {
            Ok(()) => accepted.push(message),
            Err(e) => break e,
        }
        assert!(
            accepted.len() < 5,
            "the broker refused none of {accepted:?}"
        );
    };
    assert!(refused.to_string().contains("refused"), "{refused}");
    assert!(refused.is_temporary(), "a full queue may drain: {refused}");
    assert_eq!(
        ready(&queue).await as usize,
        accepted.len(),
        "the refused message is not queued"
    );
    assert_eq!(take_all(&driver).await, ids(&accepted));
    if !batch {
        harness.cleanup(&queue).await;
        return;
    }

    let batch: Vec<Message> = (0..5).map(|_| Message::new("t")).collect();
    let err = driver
        .send_batch(&batch, DEFAULT_PRIORITY)
        .await
        .expect_err("the broker refuses some of the batch");
    let queued = take_all(&driver).await;
    assert!(
        !queued.is_empty() && queued.len() < batch.len(),
        "{queued:?}"
    );
    let sent = ids(&batch);
    let mut in_order = sent.iter().filter(|id| queued.contains(id));
    assert!(
        queued.iter().all(|id| in_order.next() == Some(id)),
        "in the batch's order"
    );
    let failed = batch.len() - queued.len();
    let says = if failed == 1 {
        "refused".to_owned()
    } else {
        format!("{failed} of 5")
    };
    assert!(err.to_string().contains(&says), "{err}");
    harness.cleanup(&queue).await;
}

fn ids(messages: &[Message]) -> Vec<String> {
    messages.iter().map(|m| m.id().to_owned()).collect()
}

/// Takes and acknowledges every message waiting on the driver's queue, in order; then stops
/// its consumers, so that none takes a message published later before it is counted.
async fn take_all(driver: &impl Driver) -> Vec<String> {
    let mut taken = Vec::new();
    while let Some(delivery) = driver
        .receive(&[], Duration::from_millis(500))
        .await
        .unwrap()
    {
        taken.push(delivery.message().id().to_owned());
        driver.ack(&delivery).await.unwrap();
    }
    driver.flush().await.unwrap();
    taken
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nack_fails_only_the_refused_messages_on_classic_queues() {
    a_nack_fails_only_the_refused_messages(&CLASSIC, "nack-classic", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nack_fails_only_the_refused_messages_on_quorum_queues() {
    a_nack_fails_only_the_refused_messages(&QUORUM, "nack-quorum", false).await;
}
