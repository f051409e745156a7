//! Scenarios of claims: what a crashed or busy instance held comes back once, and late settlements touch nothing.

use std::time::Duration;

use hermes_core::{DEFAULT_PRIORITY, Driver, Message};
use tokio::time::Instant;

use super::support::*;
use super::{Harness, Outcome};

/// A message claimed by an instance that then vanishes without acknowledging it is delivered
/// again to another instance after the visibility timeout.
pub async fn vanished_instance_message_redelivered<H: Harness>(h: &H, queue: &str) -> Outcome {
    let first = open(h, queue).await;
    if !first.capabilities().at_least_once {
        return Outcome::lacks("at_least_once");
    }
    let second = open(h, queue).await;
    let sent = message("crash", 1);
    send(&first, &sent, DEFAULT_PRIORITY).await;
    // The claim starts within the receive: its lease ends a visibility timeout after this
    // moment at the earliest, however late the receive returns.
    let claimed_at = Instant::now();
    let claimed = expect_one(&first, &[]).await;
    assert_eq!(claimed.message().id(), sent.id());
    drop(claimed);
    drop(first);
    let wait = h.visibility_timeout() * 3 + PATIENCE;
    let again = receive(&second, &[], wait)
        .await
        .expect("the message of the vanished instance was not delivered again");
    assert_eq!(again.message().id(), sent.id());
    assert!(
        claimed_at.elapsed() + Duration::from_millis(50) >= h.visibility_timeout(),
        "redelivered after {:?}, before the visibility timeout",
        claimed_at.elapsed()
    );
    ack(&second, &again).await;
    Outcome::Passed
}

/// `extend` keeps a message claimed past the visibility timeout.
pub async fn extend_keeps_claim<H: Harness>(h: &H, queue: &str) -> Outcome {
    let first = open(h, queue).await;
    if !first.capabilities().extend || !first.capabilities().at_least_once {
        return Outcome::lacks("extend");
    }
    let second = open(h, queue).await;
    send(&first, &message("slow", 1), DEFAULT_PRIORITY).await;
    let claimed = expect_one(&first, &[]).await;
    let vt = h.visibility_timeout();
    let until = Instant::now() + vt * 2 + vt / 2;
    while Instant::now() < until {
        first.extend(&claimed, vt).await.expect("extend");
        expect_none(&second, &[], vt / 2).await;
    }
    ack(&first, &claimed).await;
    expect_none(&second, &[], vt + BRIEF).await;
    Outcome::Passed
}

/// A delivery whose lease expired and whose message went to another instance is acknowledged,
/// given back and extended late by the first instance: the other instance's copy stays claimed
/// (no third instance gets it), and is still delivered again, on time, when that instance
/// vanishes.
pub async fn late_settle_leaves_the_redelivered_copy<H: Harness>(h: &H, queue: &str) -> Outcome {
    let first = open(h, queue).await;
    if !first.capabilities().at_least_once || !first.capabilities().extend {
        return Outcome::lacks("at_least_once and extend");
    }
    let second = open(h, queue).await;
    let third = open(h, queue).await;
    let vt = h.visibility_timeout();
    let sent = message("late", 1);
    send(&first, &sent, DEFAULT_PRIORITY).await;
    let stale = expect_one(&first, &[]).await;
    let copy = receive(&second, &[], vt * 3 + PATIENCE)
        .await
        .expect("the expired claim was not delivered again");
    assert_eq!(copy.message().id(), sent.id());
    second.extend(&copy, vt * 3).await.expect("extend");
    // Late, on the expired lease: each may fail or not, but must leave the copy alone.
    let _ = first.ack(&stale).await;
    let _ = first.nack(&stale).await;
    let _ = first.extend(&stale, vt * 20).await;
    drop(stale);
    drop(first);
    expect_none(&third, &[], vt).await;
    // The second instance vanishes: its copy comes back, as a claim never acknowledged does.
    drop(copy);
    drop(second);
    let again = receive(&third, &[], vt * 6 + PATIENCE)
        .await
        .expect("a late ack or extend of the expired lease removed or kept the copy's claim");
    assert_eq!(again.message().id(), sent.id());
    ack(&third, &again).await;
    expect_none(&third, &[], vt + BRIEF).await;
    Outcome::Passed
}

/// An instance busy with one message for 2.5 visibility timeouts, without asking for more,
/// holds no other message hostage: a second instance gets the rest once their claims could
/// have expired, and when the busy instance asks again it gets none of them, while the second
/// instance still holds them, nor after. Every message is delivered to one instance only.
pub async fn busy_instance_does_not_run_others_twice<H: Harness>(h: &H, queue: &str) -> Outcome {
    let busy = open(h, queue).await;
    if !busy.capabilities().at_least_once || !busy.capabilities().extend {
        return Outcome::lacks("at_least_once and extend");
    }
    let other = open(h, queue).await;
    let vt = h.visibility_timeout();
    let sent: Vec<Message> = (0..4).map(|i| message("held", i)).collect();
    driver_send_all(&busy, &sent).await;
    let slow = expect_one(&busy, &[]).await;
    let mut seen = vec![slow.message().id().to_owned()];
    let mut held = Vec::new();
    let until = Instant::now() + vt * 2 + vt / 2;
    while held.len() < sent.len() - 1 {
        busy.extend(&slow, vt).await.expect("extend");
        let step = (vt / 2).min(until.saturating_duration_since(Instant::now()));
        if let Some(d) = receive(&other, &[], step.max(Duration::from_millis(50))).await {
            seen.push(d.message().id().to_owned());
            held.push(d);
        } else if Instant::now() >= until + vt * 3 + PATIENCE {
            panic!(
                "only {} of {} messages reached the second instance",
                held.len(),
                sent.len() - 1
            );
        }
    }
    while Instant::now() < until {
        busy.extend(&slow, vt).await.expect("extend");
        for d in &held {
            other.extend(d, vt).await.expect("extend");
        }
        tokio::time::sleep(vt / 4).await;
    }
    for d in &held {
        other.extend(d, vt).await.expect("extend");
    }
    if let Some(d) = receive(&busy, &[], Duration::from_millis(300)).await {
        panic!(
            "#{} went to the busy instance while the second one holds it",
            d.message().id()
        );
    }
    for d in &held {
        ack(&other, d).await;
    }
    ack(&busy, &slow).await;
    expect_none(&busy, &[], vt + BRIEF).await;
    expect_none(&other, &[], BRIEF).await;
    seen.sort();
    let mut ids: Vec<String> = sent.iter().map(|m| m.id().to_owned()).collect();
    ids.sort();
    assert_eq!(seen, ids, "each message once");
    Outcome::Passed
}
