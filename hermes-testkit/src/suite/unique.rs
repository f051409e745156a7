//! Scenarios of unique jobs: one message per key across processes, the key given up when the
//! message is done, and a key whose worker crashed freed by its window. A driver without the
//! `unique` facet must refuse unique emits with `Error::Unsupported`.

use std::sync::Arc;
use std::time::Duration;

use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, Driver, Emitted, Emitter, Error, HandlerError, Message,
    RetryPolicy, Unique, handler_fn,
};

use super::support::{PATIENCE, ack, open};
use super::{Harness, Outcome};

/// Emits `message` uniquely by `unique` through `driver`.
async fn emit(driver: &impl Driver, message: &Message, unique: &Unique) -> Emitted {
    driver
        .unique()
        .expect("the unique facet")
        .send_unique(message, DEFAULT_PRIORITY, unique)
        .await
        .unwrap_or_else(|e| panic!("a unique emit of #{}: {e}", message.id()))
}

/// `None` when the driver has the unique facet; otherwise checks that it refuses unique emits
/// plainly and says the scenario is skipped.
async fn refused_without_the_facet(driver: Arc<dyn Driver>) -> Option<Outcome> {
    if driver.unique().is_some() {
        return None;
    }
    let refused = Emitter::from_arc(driver)
        .emit_unique(&Message::new("t"), DEFAULT_PRIORITY, &Unique::by("k"))
        .await;
    assert!(
        matches!(refused, Err(Error::Unsupported { .. })),
        "a driver without the `unique` facet refuses unique emits: {refused:?}"
    );
    Some(Outcome::lacks_facet("unique"))
}

/// Eight emits with one key at once, from four instances (processes), queue one message; the
/// other seven say they are duplicates. Another key is not held by it.
pub async fn concurrent_unique_emits_queue_one_message<H: Harness>(h: &H, queue: &str) -> Outcome {
    let first: Arc<dyn Driver> = Arc::new(open(h, queue).await);
    if let Some(skipped) = refused_without_the_facet(first.clone()).await {
        return skipped;
    }
    let mut instances = vec![first];
    for _ in 0..3 {
        instances.push(Arc::new(open(h, queue).await));
    }
    let unique = Unique::by(format!("report:{queue}")).hold_for(Duration::from_secs(60));
    let emits: Vec<_> = (0..8)
        .map(|i| {
            let driver = instances[i % instances.len()].clone();
            let unique = unique.clone();
            tokio::spawn(async move { emit(&driver, &Message::new("report"), &unique).await })
        })
        .collect();
    let mut queued = 0;
    for emit in emits {
        if emit.await.expect("an emit task") == Emitted::Queued {
            queued += 1;
        }
    }
    assert_eq!(queued, 1, "of 8 emits with one key, exactly one is queued");

    let other = Unique::by(format!("other:{queue}"));
    assert_eq!(
        emit(&instances[1], &Message::new("other"), &other).await,
        Emitted::Queued,
        "another key is free"
    );
    let mut types = Vec::new();
    while let Some(delivery) = instances[0]
        .receive(&[], Duration::from_millis(500))
        .await
        .expect("receiving")
    {
        types.push(delivery.message().message_type().to_owned());
        ack(&instances[0], &delivery).await;
    }
    types.sort();
    assert_eq!(
        types,
        ["other", "report"],
        "one message per key on the queue"
    );
    Outcome::Passed
}

/// A key held until done is given up once a worker handled its message, and once a message
/// that failed for good was dead-lettered; a retry keeps holding it. A key held until its
/// window ends stays held after the message is done.
pub async fn a_unique_key_is_free_once_its_message_is_done<H: Harness>(
    h: &H,
    queue: &str,
) -> Outcome {
    let driver: Arc<dyn Driver> = Arc::new(open(h, queue).await);
    if let Some(skipped) = refused_without_the_facet(driver.clone()).await {
        return skipped;
    }
    let emitter = Emitter::from_arc(driver.clone());
    // Runs a worker over one message of type `job`: `fails` says how many first attempts
    // fail; after them it succeeds (one retry is allowed, due at once).
    let run_one = |fails: u32| {
        let driver = driver.clone();
        async move {
            let mut dispatcher = Dispatcher::from_arc(driver).max_items(1);
            dispatcher.register_handler(
                "job",
                handler_fn(move |m: Message| async move {
                    if m.retries() < fails {
                        Err(HandlerError::msg("deliberate failure"))
                    } else {
                        Ok(true)
                    }
                })
                .with_retry(RetryPolicy::fixed(Duration::ZERO, 1)),
            );
            tokio::time::timeout(PATIENCE, dispatcher.handle(&[]))
                .await
                .expect("the dispatcher found the message")
                .expect("the dispatcher ran");
        }
    };
    let emit = |unique: Unique| {
        let emitter = emitter.clone();
        async move {
            emitter
                .emit_unique(&Message::new("job"), DEFAULT_PRIORITY, &unique)
                .await
                .expect("a unique emit")
        }
    };

    // Handled at once; failed for good (no retry left after the first); failed once, retried.
    for (fails, what) in [(0, "handled"), (2, "failed for good"), (1, "retried")] {
        let unique = Unique::by(format!("done:{fails}:{queue}")).hold_for(Duration::from_secs(60));
        assert_eq!(emit(unique.clone()).await, Emitted::Queued);
        assert_eq!(
            emit(unique.clone()).await,
            Emitted::Duplicate,
            "held while it waits"
        );
        run_one(fails).await;
        if fails == 1 {
            assert_eq!(
                emit(unique.clone()).await,
                Emitted::Duplicate,
                "held while its retry copy waits"
            );
            run_one(fails).await;
        } else if fails == 2 {
            run_one(fails).await;
        }
        assert_eq!(
            emit(unique.clone()).await,
            Emitted::Queued,
            "free once its message was {what}"
        );
        run_one(0).await;
    }

    let windowed = Unique::by(format!("window:{queue}"))
        .hold_for(Duration::from_secs(60))
        .until_window_ends();
    assert_eq!(emit(windowed.clone()).await, Emitted::Queued);
    run_one(0).await;
    assert_eq!(
        emit(windowed).await,
        Emitted::Duplicate,
        "a key held until its window ends is still held once its message is done"
    );
    Outcome::Passed
}

/// A worker that claimed a unique message and crashed (never acknowledged it) holds the key
/// until the window ends, and not after.
pub async fn a_crashed_workers_unique_key_frees_after_its_window<H: Harness>(
    h: &H,
    queue: &str,
) -> Outcome {
    let driver: Arc<dyn Driver> = Arc::new(open(h, queue).await);
    if let Some(skipped) = refused_without_the_facet(driver.clone()).await {
        return skipped;
    }
    let window = Duration::from_secs(2);
    let unique = Unique::by(format!("crash:{queue}")).hold_for(window);
    let emitter = Emitter::from_arc(driver.clone());
    let emitted_at = tokio::time::Instant::now();
    let emitted = emitter
        .emit_unique(&Message::new("job"), DEFAULT_PRIORITY, &unique)
        .await
        .expect("a unique emit");
    assert_eq!(emitted, Emitted::Queued);
    let claimed = driver
        .receive(&[], PATIENCE)
        .await
        .expect("receiving")
        .expect("the message");
    // The worker crashes: the claim is never settled.
    drop(claimed);
    let again = emitter
        .emit_unique(&Message::new("job"), DEFAULT_PRIORITY, &unique)
        .await
        .expect("a unique emit");
    if emitted_at.elapsed() < window {
        assert_eq!(again, Emitted::Duplicate, "held within its window");
    }
    tokio::time::sleep_until(emitted_at + window + Duration::from_millis(300)).await;
    let after = emitter
        .emit_unique(&Message::new("job"), DEFAULT_PRIORITY, &unique)
        .await
        .expect("a unique emit");
    assert_eq!(after, Emitted::Queued, "free once its window has passed");
    Outcome::Passed
}
