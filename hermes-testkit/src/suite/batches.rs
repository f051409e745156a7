//! Scenarios of batches: a batch has the outcome of one send per message.

use std::collections::HashSet;
use std::time::Duration;

use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Driver, Message, Priority};
use serde_json::json;

use super::support::*;
use super::{Harness, Outcome};

/// `send_batch` has the outcome of one `send` per message: a batch of 25 to the default queue
/// (one of them due in 2 s) and a smaller one to the `-high` queue each arrive once with every
/// field intact, the high ones first (in batch order on FIFO drivers), the delayed one not
/// before it is due; an empty batch is `Ok`.
pub async fn send_batch_delivers_each<H: Harness>(h: &H, queue: &str) -> Outcome {
    let (driver, second) = match open_with_priorities(h, queue).await {
        Some(driver) => (driver, HIGH),
        None => (open(h, queue).await, DEFAULT_PRIORITY),
    };
    let caps = driver.capabilities();
    driver
        .send_batch(&[], DEFAULT_PRIORITY)
        .await
        .expect("sending an empty batch");

    let build = |tag: &str, i: usize, delayed: bool| {
        let builder = Message::builder(format!("batch-{tag}"))
            .id(format!("{tag}-{i}-{queue}"))
            .payload(&json!({"z": i, "a": [tag, 2.5], "m": {"k": null}}))
            .created(1637617498.172724 + i as f64)
            .retries(i as u32 % 3);
        let builder = if delayed {
            builder.delay(Duration::from_secs(2))
        } else if i % 4 == 1 {
            builder.execute_at(unix_now() - 5.0) // due already: not delayed
        } else {
            builder
        };
        builder.build().expect("a valid message")
    };
    let n = scaled(h, 25);
    let delayed_at = caps.delay.then_some(n / 2);
    let first: Vec<Message> = (0..n)
        .map(|i| build("default", i, Some(i) == delayed_at))
        .collect();
    let m = scaled(h, 5);
    let high: Vec<Message> = (0..m).map(|i| build("high", i, false)).collect();
    driver
        .send_batch(&first, DEFAULT_PRIORITY)
        .await
        .unwrap_or_else(|e| panic!("sending a batch of {n}: {e}"));
    driver
        .send_batch(&high, second)
        .await
        .unwrap_or_else(|e| panic!("sending a batch of {m} to priority {second}: {e}"));

    let mut got: Vec<(Message, Priority)> = Vec::new();
    for _ in 0..n + m {
        let d = expect_one(&driver, &[]).await;
        let now = unix_now();
        if let Some(due) = d.message().execute_at() {
            assert!(
                now >= due - 0.001,
                "#{} delivered {:.3}s early",
                d.message().id(),
                due - now
            );
        }
        got.push((d.message().clone(), d.priority()));
        ack(&driver, &d).await;
    }
    expect_none(&driver, &[], BRIEF).await;

    let ids: HashSet<&str> = got.iter().map(|(m, _)| m.id()).collect();
    assert_eq!(ids.len(), got.len(), "a message was delivered twice");
    for (sent, priority) in first
        .iter()
        .map(|m| (m, DEFAULT_PRIORITY))
        .chain(high.iter().map(|m| (m, second)))
    {
        let (received, on) = got
            .iter()
            .find(|(m, _)| m.id() == sent.id())
            .unwrap_or_else(|| panic!("#{} was not delivered", sent.id()));
        assert_eq!(received, sent, "a field changed");
        assert_eq!(*on, priority, "#{} came from another priority", sent.id());
    }
    if second == HIGH {
        let order: Vec<Priority> = got.iter().map(|(_, p)| *p).collect();
        assert!(
            order[..m].iter().all(|p| *p == HIGH),
            "the high batch comes first: {order:?}"
        );
    }
    if caps.fifo {
        // Each batch in its order, counting the messages without `execute_at` (some drivers
        // order by due time, and `created` grows with the batch order).
        let in_order = |messages: Vec<&Message>| -> Vec<String> {
            messages
                .into_iter()
                .filter(|m| m.execute_at().is_none())
                .map(|m| m.id().to_owned())
                .collect()
        };
        for batch in [&first, &high] {
            let tag = batch[0].message_type();
            let received = got
                .iter()
                .map(|(m, _)| m)
                .filter(|m| m.message_type() == tag);
            assert_eq!(
                in_order(received.collect()),
                in_order(batch.iter().collect()),
                "a batch came out of order"
            );
        }
    }
    Outcome::Passed
}
