//! Claims and the schedule's priorities as other programs leave them: claims in the older
//! member format, and delayed messages promoted by a PHP worker, which knows no priority index.

mod common;

use std::time::Duration;

use common::{Setup, cmd};
use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Driver, JsonSerializer, Message, Serializer};
use hermes_testkit::suite::unique_queue_name;

async fn cleanup(queue: &str) {
    for suffix in [
        "",
        "_schedule",
        "_schedule_priorities",
        "_schedule_by_priority",
        "_in_flight",
        "_high",
    ] {
        let key = format!("{queue}{suffix}");
        cmd::<i64>(&[b"DEL", key.as_bytes()]).await;
    }
}

async fn both(test: impl AsyncFn(Setup, String)) {
    for setup in [Setup::REDIS_RS, Setup::FRED] {
        let queue = unique_queue_name("claims");
        test(setup, queue.clone()).await;
        cleanup(&queue).await;
    }
}

fn body_of(message: &Message) -> Vec<u8> {
    JsonSerializer.serialize(message).unwrap()
}

/// A claim written as `<priority>|<message>` (before claims had tokens), left by a worker that
/// died, comes back to its set once expired, and is handled and removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_of_the_older_format_come_back_after_they_expire() {
    both(async |setup, queue| {
        let driver = setup.connect(setup.options(&queue)).await.unwrap();
        driver
            .setup_priority_queue(&format!("{queue}_high"), 200)
            .unwrap();
        let in_flight = format!("{queue}_in_flight");
        let old = Message::new("old-claim");
        let old_high = Message::new("old-claim-high");
        for (priority, m) in [(100, &old), (200, &old_high)] {
            let mut member = format!("{priority}|").into_bytes();
            member.extend(body_of(m));
            cmd::<i64>(&[b"ZADD", in_flight.as_bytes(), b"1", &member]).await;
        }
        let first = driver
            .receive(&[], Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.message().id(), old_high.id());
        assert_eq!(first.priority(), 200);
        let second = driver
            .receive(&[], Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(second.message().id(), old.id());
        driver.ack(&first).await.unwrap();
        driver.ack(&second).await.unwrap();
        driver.flush().await.unwrap();
        assert_eq!(cmd::<i64>(&[b"ZCARD", in_flight.as_bytes()]).await, 0);
    })
    .await;
}

/// A PHP worker promotes a delayed message the way Hermes does (ZREM from the schedule, SADD to
/// the default set) and knows nothing of the priority Rust remembered: nothing is left behind
/// once Rust schedules or claims again, however many such messages there were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_php_promoter_leaves_no_priority_entry_behind() {
    both(async |setup, queue| {
        let driver = setup.connect(setup.options(&queue)).await.unwrap();
        driver
            .setup_priority_queue(&format!("{queue}_high"), 200)
            .unwrap();
        let schedule = format!("{queue}_schedule");
        let index = format!("{queue}_schedule_by_priority");
        let legacy = format!("{queue}_schedule_priorities");
        let delayed: Vec<Message> = (0..20)
            .map(|i| {
                Message::builder("later")
                    .id(format!("later-{i}"))
                    .execute_at(unix_now() + 0.3)
                    .build()
                    .unwrap()
            })
            .collect();
        for m in &delayed {
            driver.send(m, 200).await.unwrap();
        }
        assert_eq!(cmd::<i64>(&[b"ZCARD", index.as_bytes()]).await, 20);
        tokio::time::sleep(Duration::from_millis(400)).await;
        // As PHP's promoter: each due member moved to the default set by a plain client.
        for m in &delayed {
            let body = body_of(m);
            assert_eq!(cmd::<i64>(&[b"ZREM", schedule.as_bytes(), &body]).await, 1);
            cmd::<i64>(&[b"SADD", queue.as_bytes(), &body]).await;
        }
        // A Rust emitter schedules again: the stale entries go.
        let next = Message::builder("next")
            .delay(Duration::from_secs(60))
            .build()
            .unwrap();
        driver.send(&next, 200).await.unwrap();
        assert_eq!(
            cmd::<i64>(&[b"ZCARD", index.as_bytes()]).await,
            1,
            "only the new entry"
        );
        assert_eq!(cmd::<i64>(&[b"EXISTS", legacy.as_bytes()]).await, 0);
        // And a Rust worker, which handles what PHP promoted, leaves none either.
        for _ in 0..20 {
            let d = driver
                .receive(&[], Duration::from_secs(5))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                d.priority(),
                DEFAULT_PRIORITY,
                "PHP promoted it to the default set"
            );
            driver.ack(&d).await.unwrap();
        }
        let again = Message::builder("again")
            .execute_at(unix_now() + 0.2)
            .build()
            .unwrap();
        driver.send(&again, 200).await.unwrap();
        cmd::<i64>(&[b"ZREM", schedule.as_bytes(), &body_of(&again)]).await;
        cmd::<i64>(&[b"ZREM", schedule.as_bytes(), &body_of(&next)]).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            driver
                .receive(&[], Duration::from_millis(200))
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(
            cmd::<i64>(&[b"ZCARD", index.as_bytes()]).await,
            1,
            "the claim removed the due one"
        );
    })
    .await;
}

/// A message scheduled by an older version at another priority (its priority in the hash
/// `<schedule>_priorities`) still comes back on that priority, and its entry goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_scheduled_by_older_versions_keep_their_priority() {
    both(async |setup, queue| {
        let driver = setup.connect(setup.options(&queue)).await.unwrap();
        driver
            .setup_priority_queue(&format!("{queue}_high"), 200)
            .unwrap();
        let m = Message::builder("older")
            .execute_at(unix_now() - 1.0)
            .build()
            .unwrap();
        let body = body_of(&m);
        let legacy = format!("{queue}_schedule_priorities");
        let schedule = format!("{queue}_schedule");
        cmd::<i64>(&[b"ZADD", schedule.as_bytes(), b"1", &body]).await;
        cmd::<i64>(&[b"HSET", legacy.as_bytes(), &body, b"200"]).await;
        let d = driver
            .receive(&[], Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(d.message().id(), m.id());
        assert_eq!(d.priority(), 200);
        driver.ack(&d).await.unwrap();
        assert_eq!(cmd::<i64>(&[b"EXISTS", legacy.as_bytes()]).await, 0);
    })
    .await;
}

/// More delayed messages of another priority than one claim promotes (100) fall due at once:
/// every one still comes back on its own priority.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_due_messages_keeps_every_priority() {
    both(async |setup, queue| {
        let driver = setup.connect(setup.options(&queue)).await.unwrap();
        driver
            .setup_priority_queue(&format!("{queue}_high"), 200)
            .unwrap();
        let due = unix_now() + 0.5;
        let burst: Vec<Message> = (0..250)
            .map(|i| {
                Message::builder("burst")
                    .id(format!("burst-{i}"))
                    .execute_at(due)
                    .build()
                    .unwrap()
            })
            .collect();
        driver.send_batch(&burst, 200).await.unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
        for _ in 0..burst.len() {
            let d = driver
                .receive(&[], Duration::from_secs(5))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(d.priority(), 200, "#{} lost its priority", d.message().id());
            driver.ack(&d).await.unwrap();
        }
        assert!(
            driver
                .receive(&[], Duration::from_millis(200))
                .await
                .unwrap()
                .is_none()
        );
    })
    .await;
}
