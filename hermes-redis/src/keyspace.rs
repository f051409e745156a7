//! Keyspace wake-ups: idle workers woken by the server's own keyspace events when a message
//! lands in one of the queue's sets or in its schedule, whoever sent it (a PHP emitter pokes
//! no wake list). Off by default ([`RedisOptions::keyspace_wake_ups`](crate::RedisOptions));
//! the server publishes the events only when its `notify-keyspace-events` holds `K` and the
//! classes of sets and sorted sets (`s` and `z`, or `A`).

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::watch;

use crate::client::{OpenKeyspace, Reply};
use crate::wake::Wakes;

/// The events that put a message where a claim finds it: `SADD` on a set, `ZADD` on the
/// schedule; and none (some events were missed).
fn lands(event: &str) -> bool {
    matches!(event, "sadd" | "zadd" | "")
}

/// Starts, once, the task that wakes the receives of `wakes` on the keyspace events of the
/// queue's sets and schedule, when they are wanted. It runs while the driver lives.
pub(crate) fn follow_keyspace(wakes: &Arc<Wakes>) {
    let Some((open, watched, refresh)) = wakes.follow() else {
        return;
    };
    let weak = Arc::downgrade(wakes);
    tokio::spawn(async move {
        let _running = FollowingRunning(weak.clone());
        follow(weak, open, watched, refresh).await;
    });
}

/// Clears the flag of the task following keyspace events when it ends, however it ends.
struct FollowingRunning(Weak<Wakes>);

impl Drop for FollowingRunning {
    fn drop(&mut self) {
        if let Some(wakes) = self.0.upgrade() {
            wakes.followed();
        }
    }
}

/// Follows the keyspace events of the keys `watched` holds while the driver `weak` lives,
/// starting a round of claims for each that lands a message; subscribes again when the
/// subscription is lost (after `refresh`) or the keys change.
async fn follow(
    weak: Weak<Wakes>,
    open: OpenKeyspace,
    mut watched: watch::Receiver<Vec<String>>,
    refresh: Duration,
) {
    if let Some(wakes) = weak.upgrade() {
        check_server(&wakes).await;
    }
    let mut failure: Option<String> = None;
    loop {
        let keys = watched.borrow_and_update().clone();
        let mut events = match open(keys).await {
            Ok(events) => {
                failure = None;
                events
            }
            Err(e) => {
                let text = e.to_string();
                if failure.as_deref() != Some(text.as_str()) {
                    if let Some(wakes) = weak.upgrade() {
                        tracing::warn!(
                            "Subscribing to keyspace events of {} failed - {text}; other \
                             emitters' messages are found every refresh interval meanwhile",
                            wakes.key()
                        );
                    }
                    failure = Some(text);
                }
                tokio::select! {
                    () = tokio::time::sleep(refresh) => continue,
                    changed = watched.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        continue;
                    }
                }
            }
        };
        loop {
            tokio::select! {
                event = events.next() => {
                    let Some(event) = event else { break };
                    let Some(wakes) = weak.upgrade() else { return };
                    if lands(&event) {
                        wakes.wake_receives();
                    }
                }
                changed = watched.changed() => {
                    if changed.is_err() {
                        // The driver is gone.
                        return;
                    }
                    break;
                }
            }
        }
        // Lost, or the keys changed: whatever happened meanwhile is claimed now.
        if let Some(wakes) = weak.upgrade() {
            wakes.wake_receives();
        }
    }
}

/// Warns when the server does not publish the events wanted. A server that does not answer
/// `CONFIG GET` (renamed or forbidden for this user) is taken at its word.
async fn check_server(wakes: &Wakes) {
    let Ok(reply) = wakes
        .client()
        .command("CONFIG", &[b"GET", b"notify-keyspace-events"])
        .await
    else {
        return;
    };
    let Some(flags) = reply
        .into_items()
        .into_iter()
        .nth(1)
        .and_then(Reply::into_bytes)
    else {
        return;
    };
    let flags = String::from_utf8_lossy(&flags);
    let has = |class: char| flags.contains(class) || flags.contains('A');
    if !(flags.contains('K') && has('s') && has('z')) {
        tracing::warn!(
            "Keyspace wake-ups of {} wait for events the server does not publish: its \
             notify-keyspace-events is {flags:?}, and needs K, s and z (or KA); other \
             emitters' messages are found every refresh interval meanwhile",
            wakes.key()
        );
    }
}
