//! Scenarios of dead letters: a message that failed for good is kept with its reason, and replays.

use std::sync::Arc;
use std::time::Duration;

use hermes_core::inspect::{DeadKind, Replay};
use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, DispatcherOptions, Driver, HandlerError, Message, handler_fn,
};
use serde_json::json;

use super::support::{PATIENCE, ack, expect_one, message, open, send};
use super::{Harness, Outcome};

/// A message whose handler fails without a retry policy becomes a dead letter with the
/// reason; an undecodable body does too. Replaying puts the message back due now with its
/// retries reset, and the body back as it was; the replayed message is handled.
pub async fn failed_messages_become_dead_letters_and_replay<H: Harness>(
    h: &H,
    queue: &str,
) -> Outcome {
    let driver: Arc<dyn Driver> = Arc::new(open(h, queue).await);
    let Some(dead_letters) = driver.dead_letters() else {
        return Outcome::lacks_facet("dead_letters");
    };
    let doomed = Message::builder("doomed")
        .id("doomed-1")
        .payload(&json!({"n": 1}))
        .retries(2)
        .build()
        .expect("a message");
    send(&driver, &doomed, DEFAULT_PRIORITY).await;
    let garbage: &[u8] = b"{not hermes json";
    let with_garbage = h.carries_raw(garbage);
    if with_garbage {
        h.push_raw(queue, garbage).await.expect("pushing garbage");
    }

    let mut dispatcher = Dispatcher::from_arc(driver.clone()).max_items(1);
    dispatcher.register_handler(
        "doomed",
        handler_fn(|_m: Message| async { Err::<bool, _>(HandlerError::msg("the disk is full")) })
            .named("Archiver"),
    );
    tokio::time::timeout(PATIENCE, dispatcher.handle(&[]))
        .await
        .expect("the dispatcher found no message")
        .expect("the dispatcher failed");
    if with_garbage {
        // The garbage is dead-lettered by the driver as the next receive meets it.
        let next = driver.receive(&[], Duration::from_secs(2)).await;
        assert!(
            matches!(next, Err(hermes_core::Error::Undecodable { .. }) | Ok(None)),
            "{next:?}"
        );
    }

    let letters = dead_letters
        .list(DEFAULT_PRIORITY, 10)
        .await
        .expect("listing dead letters");
    let failed = letters
        .iter()
        .find(|l| l.id == "doomed-1")
        .expect("the failed message is a dead letter");
    assert_eq!(failed.reason.kind, DeadKind::Failed);
    assert_eq!(failed.reason.error, "the disk is full");
    assert_eq!(failed.reason.handler.as_deref(), Some("Archiver"));
    assert_eq!(failed.reason.retries, 2);
    assert!((failed.reason.at - hermes_core::time::unix_now()).abs() < 120.0);
    assert_eq!(failed.message.as_ref(), Some(&doomed));
    if with_garbage {
        let undecodable = letters
            .iter()
            .find(|l| l.reason.kind == DeadKind::Undecodable)
            .expect("the garbage is a dead letter");
        assert!(undecodable.message.is_none());
        assert!(
            !undecodable.reason.error.contains("not hermes"),
            "no input in the reason"
        );
    }

    let replayed = dead_letters
        .replay(DEFAULT_PRIORITY, &Replay::ids(["doomed-1"]))
        .await
        .expect("replaying");
    assert_eq!(replayed, 1);
    let back = expect_one(&driver, &[]).await;
    assert_eq!(back.message().id(), "doomed-1");
    assert_eq!(back.message().retries(), 0, "retries reset");
    assert_eq!(back.message().payload(), doomed.payload());
    assert_eq!(back.message().execute_at(), None, "due now");
    ack(&driver, &back).await;
    let left = dead_letters
        .list(DEFAULT_PRIORITY, 10)
        .await
        .expect("listing dead letters");
    assert!(left.iter().all(|l| l.id != "doomed-1"), "replayed, so gone");

    let mut options = DispatcherOptions::default();
    options.max_items = 1;
    options.keep_dead_letters = false;
    let dropped = message("doomed", 2);
    send(&driver, &dropped, DEFAULT_PRIORITY).await;
    let mut dispatcher = Dispatcher::from_arc(driver.clone()).options(options);
    dispatcher.register_fn("doomed", |_m| async { Err(HandlerError::msg("again")) });
    tokio::time::timeout(PATIENCE, dispatcher.handle(&[]))
        .await
        .expect("the dispatcher found no message")
        .expect("the dispatcher failed");
    let letters = dead_letters
        .list(DEFAULT_PRIORITY, 10)
        .await
        .expect("listing dead letters");
    assert!(
        letters.iter().all(|l| l.id != dropped.id()),
        "with the opt-out it is dropped, as Hermes does"
    );
    Outcome::Passed
}
