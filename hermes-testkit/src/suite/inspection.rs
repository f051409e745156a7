//! Scenarios of inspection: figures, peeks, purges and deletes, run on drivers with the facets.

use std::time::Duration;

use hermes_core::driver::{Browse, Delivery, Inspect};
use hermes_core::inspect::{DeadKind, DeadReason, Figure, PageRequest, QueueState, QueueStats};
use hermes_core::{DEFAULT_PRIORITY, Driver, Message};
use serde_json::json;

use super::support::{PATIENCE, ack, message, open, send};
use super::{Harness, Outcome};

/// The figures of the default queue.
async fn default_stats(inspect: &dyn Inspect) -> QueueStats {
    let stats = inspect.stats().await.expect("stats");
    stats
        .into_iter()
        .find(|s| s.priority == DEFAULT_PRIORITY)
        .expect("the default queue in the stats")
}

/// Checks that `figure` is `want`: exactly when the driver says it is exact, within the
/// approximation when it says it is approximate (no further than 1 off), and anything when it
/// says it cannot tell.
fn assert_count(figure: Figure<u64>, want: u64, what: &str) {
    match figure {
        Figure::Exact(got) => assert_eq!(got, want, "{what}"),
        Figure::Approximate(got) => {
            assert!(got.abs_diff(want) <= 1, "{what}: {got}, want about {want}");
        }
        _ => {}
    }
}

async fn claim(driver: &impl Driver) -> Delivery {
    driver
        .receive(&[], PATIENCE)
        .await
        .expect("receive")
        .expect("a message")
}

/// After known sends, a claim, delays and a dead letter, the figures of the queue match: 2
/// waiting, 2 delayed, 1 in flight, 1 dead; the latency of a queue whose oldest message has
/// waited a second is at least that second, and zero once the queue is empty.
pub async fn stats_count_every_state<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let Some(inspect) = driver.inspect() else {
        return Outcome::lacks_facet("inspect");
    };
    let empty = default_stats(inspect).await;
    assert_count(empty.waiting, 0, "waiting when empty");
    if let Figure::Exact(latency) = empty.latency {
        assert_eq!(latency, Duration::ZERO, "empty latency");
    }
    for n in 0..4 {
        send(&driver, &message("counted", n), DEFAULT_PRIORITY).await;
    }
    for n in 0..2 {
        let delayed = Message::builder("counted")
            .payload(&json!({ "n": 10 + n }))
            .delay(Duration::from_secs(600))
            .build()
            .expect("a message");
        send(&driver, &delayed, DEFAULT_PRIORITY).await;
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let held = claim(&driver).await;
    let dead = if let Some(dead_letters) = driver.dead_letters() {
        let doomed = claim(&driver).await;
        let reason = DeadReason::new(DeadKind::Failed, "deliberate").with_handler("scenario");
        dead_letters
            .add(&doomed, &reason)
            .await
            .expect("dead-lettering");
        1
    } else {
        0
    };
    let stats = default_stats(inspect).await;
    assert_count(stats.waiting, 3 - dead, "waiting");
    assert_count(stats.delayed, 2, "delayed");
    assert_count(stats.in_flight, 1, "in flight");
    if dead == 1 {
        assert_count(stats.dead, 1, "dead");
    }
    if let Figure::Exact(latency) = stats.latency {
        assert!(latency >= Duration::from_secs(1), "latency {latency:?}");
        assert!(latency < Duration::from_secs(60), "latency {latency:?}");
    }
    ack(&driver, &held).await;
    Outcome::Passed
}

/// A peek lists waiting and delayed messages, oldest first and at most `limit`, and leaves them
/// where they were: the next receive still gets the first one.
pub async fn peek_leaves_messages_where_they_were<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let caps = driver.capabilities();
    let Some(browse) = driver.browse() else {
        return Outcome::lacks_facet("browse");
    };
    let sent: Vec<Message> = (0..3).map(|n| message("peeked", n)).collect();
    for m in &sent {
        send(&driver, m, DEFAULT_PRIORITY).await;
    }
    let later = Message::builder("peeked")
        .delay(Duration::from_secs(600))
        .build()
        .expect("a message");
    send(&driver, &later, DEFAULT_PRIORITY).await;

    let peeked = browse
        .peek(DEFAULT_PRIORITY, QueueState::Waiting, 2)
        .await
        .expect("peek");
    assert_eq!(peeked.len(), 2, "the limit holds");
    if caps.fifo {
        assert_eq!(peeked, sent[..2], "oldest first, every field");
    }
    let again = browse
        .peek(DEFAULT_PRIORITY, QueueState::Waiting, 10)
        .await
        .expect("peek");
    assert_eq!(again.len(), 3, "a peek takes nothing away");
    let delayed = browse
        .peek(DEFAULT_PRIORITY, QueueState::Delayed, 10)
        .await
        .expect("peek delayed");
    assert_eq!(delayed, std::slice::from_ref(&later));

    let first = claim(&driver).await;
    if caps.fifo {
        assert_eq!(
            first.message().id(),
            sent[0].id(),
            "the next receive is unchanged"
        );
    }
    match browse
        .peek(DEFAULT_PRIORITY, QueueState::InFlight, 10)
        .await
    {
        Ok(in_flight) => assert_eq!(in_flight, [first.message().clone()]),
        // Without claims a taken message has left the backend: there is nothing to list.
        Err(hermes_core::Error::Unsupported { .. }) if !caps.at_least_once => {}
        Err(e) => panic!("peek in flight: {e}"),
    }
    ack(&driver, &first).await;
    Outcome::Passed
}

/// Every page of a state, from the first through each `next`, in a state nobody changes.
async fn walk(browse: &dyn Browse, request: PageRequest) -> Vec<Vec<Message>> {
    let mut pages = Vec::new();
    let mut request = request;
    loop {
        let page = browse
            .page(DEFAULT_PRIORITY, &request)
            .await
            .unwrap_or_else(|e| panic!("a page of {}: {e}", request.state));
        assert!(
            page.messages.len() <= request.limit,
            "a page of {} holds {} messages, over its limit of {}",
            request.state,
            page.messages.len(),
            request.limit
        );
        pages.push(page.messages);
        match page.next {
            Some(next) => request.cursor = Some(next),
            None => return pages,
        }
        assert!(
            pages.len() < 200,
            "the pages of {} never end",
            request.state
        );
    }
}

fn ids(messages: &[Message]) -> Vec<String> {
    let mut ids: Vec<String> = messages.iter().map(|m| m.id().to_owned()).collect();
    ids.sort();
    ids
}

/// Pages of waiting, delayed and dead messages, walked from the first through each cursor,
/// meet each message of the state once (in sending order where the driver is FIFO) and no
/// more than the limit at a time, filtered by type when asked; a message is found by its id
/// with its state; a cursor the backend did not give is refused; nothing is taken.
pub async fn pages_meet_every_message_once<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let caps = driver.capabilities();
    let Some(browse) = driver.browse() else {
        return Outcome::lacks_facet("browse");
    };
    let waiting: Vec<Message> = (0..23)
        .map(|n| {
            let kind = if n % 3 == 0 { "paged.a" } else { "paged.b" };
            message(kind, n)
        })
        .collect();
    for m in &waiting {
        send(&driver, m, DEFAULT_PRIORITY).await;
    }
    let delayed: Vec<Message> = (0..4)
        .map(|n| {
            Message::builder("paged.later")
                .payload(&json!({ "n": n }))
                .delay(Duration::from_secs(600))
                .build()
                .expect("a message")
        })
        .collect();
    for m in &delayed {
        send(&driver, m, DEFAULT_PRIORITY).await;
    }

    let pages = walk(browse, PageRequest::new(QueueState::Waiting, 5)).await;
    let met: Vec<Message> = pages.concat();
    assert_eq!(ids(&met), ids(&waiting), "each waiting message on one page");
    if caps.fifo {
        assert_eq!(met, waiting, "in sending order, every field");
    }
    let of_a: Vec<Message> = waiting
        .iter()
        .filter(|m| m.message_type() == "paged.a")
        .cloned()
        .collect();
    let filtered = walk(
        browse,
        PageRequest::new(QueueState::Waiting, 2).of_type("paged.a"),
    )
    .await
    .concat();
    assert_eq!(
        ids(&filtered),
        ids(&of_a),
        "only and every message of the type"
    );
    let later = walk(browse, PageRequest::new(QueueState::Delayed, 3)).await;
    assert_eq!(
        ids(&later.concat()),
        ids(&delayed),
        "each delayed message once"
    );

    let mut dead_id = None;
    if let Some(dead_letters) = driver.dead_letters() {
        let doomed = claim(&driver).await;
        let reason = DeadReason::new(DeadKind::Failed, "deliberate").with_handler("scenario");
        dead_letters
            .add(&doomed, &reason)
            .await
            .expect("dead-lettering");
        let dead = walk(browse, PageRequest::new(QueueState::Dead, 1))
            .await
            .concat();
        assert_eq!(
            ids(&dead),
            [doomed.message().id().to_owned()],
            "the dead letter"
        );
        dead_id = Some(doomed.message().id().to_owned());
    }

    let still = waiting
        .iter()
        .find(|m| Some(m.id()) != dead_id.as_deref())
        .expect("a waiting message");
    let found = browse
        .find(DEFAULT_PRIORITY, still.id())
        .await
        .expect("find");
    assert_eq!(
        found,
        Some((QueueState::Waiting, still.clone())),
        "found waiting"
    );
    let found = browse
        .find(DEFAULT_PRIORITY, delayed[2].id())
        .await
        .expect("find");
    assert_eq!(
        found,
        Some((QueueState::Delayed, delayed[2].clone())),
        "found delayed"
    );
    if let Some(id) = &dead_id {
        let found = browse.find(DEFAULT_PRIORITY, id).await.expect("find");
        assert_eq!(
            found.map(|(state, _)| state),
            Some(QueueState::Dead),
            "found dead"
        );
    }
    let none = browse.find(DEFAULT_PRIORITY, "no-such-message").await;
    assert_eq!(none.expect("find"), None);

    let bogus = PageRequest::new(QueueState::Waiting, 5).after("not a cursor <\u{0}>");
    match browse.page(DEFAULT_PRIORITY, &bogus).await {
        Err(hermes_core::Error::InvalidCursor) => {}
        other => panic!("a cursor the backend never gave: {other:?}"),
    }

    let left = waiting.len() - usize::from(dead_id.is_some());
    let again = walk(browse, PageRequest::new(QueueState::Waiting, 100))
        .await
        .concat();
    assert_eq!(again.len(), left, "the pages took nothing away");
    Outcome::Passed
}

/// A purge empties the state it names and no other; a delete removes one message by id.
pub async fn purge_empties_only_what_it_names<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver = open(h, queue).await;
    let Some(inspect) = driver.inspect() else {
        return Outcome::lacks_facet("inspect");
    };
    for n in 0..3 {
        send(&driver, &message("purged", n), DEFAULT_PRIORITY).await;
    }
    let later = Message::builder("purged")
        .delay(Duration::from_secs(600))
        .build()
        .expect("a message");
    send(&driver, &later, DEFAULT_PRIORITY).await;

    let purged = inspect
        .purge(DEFAULT_PRIORITY, QueueState::Waiting)
        .await
        .expect("purging waiting");
    if let Some(n) = purged {
        assert_eq!(n, 3);
    }
    assert!(
        driver
            .receive(&[], Duration::from_millis(500))
            .await
            .expect("receive")
            .is_none(),
        "nothing waiting is left"
    );
    let stats = default_stats(inspect).await;
    assert_count(stats.delayed, 1, "the delayed one stays");
    if let Some(browse) = driver.browse() {
        assert!(
            browse
                .delete(DEFAULT_PRIORITY, later.id())
                .await
                .expect("delete")
        );
        assert!(
            !browse
                .delete(DEFAULT_PRIORITY, later.id())
                .await
                .expect("delete")
        );
    } else {
        match inspect.purge(DEFAULT_PRIORITY, QueueState::Delayed).await {
            Ok(_) => {}
            // A backend may be unable to purge delayed messages alone (SQS cannot reach
            // them); the delayed one then stays.
            Err(hermes_core::Error::Unsupported { .. }) => return Outcome::Passed,
            Err(e) => panic!("purging delayed: {e}"),
        }
    }
    let stats = default_stats(inspect).await;
    assert_count(stats.delayed, 0, "no delayed one left");
    Outcome::Passed
}
