//! The Redis driver against PHP Hermes' wire format and keys, `RedisShutdown`, and a lost
//! connection under a running worker.

mod common;

use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use common::{Setup, cmd, redis_url};
use hermes_core::flow::{Admission, Bound, Rate};
use hermes_core::{
    DEFAULT_PRIORITY, Dispatcher, Driver, Emitter, JsonSerializer, Message, Serializer, Shutdown,
};
use hermes_redis::{RedisSetDriver, RedisShutdown};
use hermes_testkit::suite::unique_queue_name;

const PHP_JSON: &str = r#"{"message":{"id":"php-1","type":"send-email","created":1637617498.172724,"payload":{"to":"a\/b@x.sk","name":"\u017dlt\u00fd k\u00f4\u0148"},"execute_at":null,"retries":0}}"#;

fn redis_cli(args: &[&str]) -> String {
    let url = redis_url();
    let output = Command::new("redis-cli")
        .args(["-u", &url])
        .args(args)
        .output()
        .expect("redis-cli is installed (the test command installs it)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

async fn cleanup(queue: &str) {
    for key in [
        queue.to_owned(),
        format!("{queue}_schedule"),
        format!("{queue}_schedule_priorities"),
        format!("{queue}_schedule_by_priority"),
        format!("{queue}_in_flight"),
        format!("{queue}_high"),
    ] {
        cmd::<i64>(&[b"DEL", key.as_bytes()]).await;
    }
}

async fn both(test: impl AsyncFn(Setup, String)) {
    for setup in [Setup::REDIS_RS, Setup::FRED] {
        let queue = unique_queue_name("behaviour");
        test(setup, queue.clone()).await;
        cleanup(&queue).await;
    }
}

/// A message scheduled as a PHP emitter schedules it (`ZADD` to the schedule, without a
/// priority) is promoted when due, not before, to the default set. (A message put in the set
/// directly is the conformance suite's `php_json_in_hermes_json_out`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_scheduled_with_redis_cli_is_promoted_when_due() {
    both(async |setup, queue| {
        let driver = setup.connect(setup.options(&queue)).await.unwrap();
        let due = hermes_core::time::unix_now() + 1.0;
        let delayed = PHP_JSON.replace(r#""execute_at":null"#, &format!(r#""execute_at":{due}"#));
        redis_cli(&[
            "ZADD",
            &format!("{queue}_schedule"),
            &due.to_string(),
            &delayed,
        ]);

        let d = driver
            .receive(&[], Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(d.message().id(), "php-1");
        assert!(
            hermes_core::time::unix_now() >= due - 0.01,
            "promoted when due, not before"
        );
        assert_eq!(
            d.priority(),
            DEFAULT_PRIORITY,
            "an unknown priority lands in the default set"
        );
        driver.ack(&d).await.unwrap();
        assert_eq!(redis_cli(&["SCARD", &queue]).trim(), "0");
        assert_eq!(
            redis_cli(&["ZCARD", &format!("{queue}_schedule")]).trim(),
            "0"
        );
    })
    .await;
}

/// A delayed message at another priority waits in the schedule, scored by its due time, with
/// its priority remembered beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_message_waits_in_the_schedule_with_its_priority() {
    both(async |setup, queue| {
        let driver = setup.connect(setup.options(&queue)).await.unwrap();
        driver
            .setup_priority_queue(&format!("{queue}_high"), 200)
            .unwrap();
        let at = hermes_core::time::unix_now() + 60.0;
        let delayed = Message::builder("t")
            .id("rust-2")
            .execute_at(at)
            .build()
            .unwrap();
        driver.send(&delayed, 200).await.unwrap();
        let body = String::from_utf8(JsonSerializer.serialize(&delayed).unwrap()).unwrap();
        let score: f64 = redis_cli(&["ZSCORE", &format!("{queue}_schedule"), &body])
            .trim()
            .parse()
            .unwrap();
        assert!((score - at).abs() < 1e-3, "{score} vs {at}");
        let entry = format!("200|{body}");
        let indexed: f64 = redis_cli(&["ZSCORE", &format!("{queue}_schedule_by_priority"), &entry])
            .trim()
            .parse()
            .unwrap();
        assert!((indexed - at).abs() < 1e-3, "{indexed} vs {at}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_shutdown_follows_hermes_rules() {
    both(async |setup, queue| {
        let driver = setup.connect(setup.options(&queue)).await.unwrap();
        let key = format!("{queue}_shutdown");
        let shutdown = RedisShutdown::new(driver.client(), key.clone());
        let started = SystemTime::now() - Duration::from_secs(10);
        assert!(!shutdown.should_shutdown(started).await.unwrap(), "no key");
        let unix = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        redis_cli(&[
            "SET",
            &key,
            &unix(started - Duration::from_secs(60)).to_string(),
        ]);
        assert!(
            !shutdown.should_shutdown(started).await.unwrap(),
            "before the start"
        );
        redis_cli(&[
            "SET",
            &key,
            &unix(SystemTime::now() + Duration::from_secs(3600)).to_string(),
        ]);
        assert!(
            !shutdown.should_shutdown(started).await.unwrap(),
            "scheduled later"
        );
        let before = unix(SystemTime::now());
        shutdown.shutdown(None).await.unwrap();
        let stored: u64 = redis_cli(&["GET", &key]).trim().parse().unwrap();
        // The second may turn between the call and the clock read here.
        assert!(
            (before..=unix(SystemTime::now())).contains(&stored),
            "{stored} is not now"
        );
        assert!(shutdown.should_shutdown(started).await.unwrap(), "now");

        // A worker started before the signal stops.
        redis_cli(&["DEL", &key]);
        let dispatcher = Dispatcher::new(driver.clone()).with_shutdown(shutdown.clone());
        let stopper = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            shutdown.shutdown(None).await.unwrap();
        });
        tokio::time::timeout(Duration::from_secs(10), dispatcher.handle(&[]))
            .await
            .expect("the worker stopped")
            .unwrap();
        stopper.await.unwrap();
        redis_cli(&["DEL", &key]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_connection_does_not_stop_the_worker() {
    both(async |setup, queue| {
        let worker = setup.connect(setup.options(&queue)).await.unwrap();
        let emitter = Emitter::new(setup.connect(setup.options(&queue)).await.unwrap());
        let (recorder, handled) = hermes_testkit::recording_handler();
        let mut dispatcher = Dispatcher::new(worker.clone()).max_items(40);
        dispatcher.register_handler("job", recorder);
        let running = tokio::spawn(async move { dispatcher.handle(&[]).await });
        let mut sent = Vec::new();
        for i in 0..40 {
            if i == 20 {
                // Kill the worker's connection from outside, as an operator or a failover would.
                let id = worker.client().command("CLIENT", &[b"ID"]).await.unwrap();
                let id = id.as_int().unwrap().to_string();
                let killed: i64 = cmd(&[b"CLIENT", b"KILL", b"ID", id.as_bytes()]).await;
                assert_eq!(killed, 1);
            }
            let m = Message::builder("job")
                .payload(&serde_json::json!({"i": i}))
                .build()
                .unwrap();
            sent.push(m.id().to_owned());
            emitter.emit(&m, DEFAULT_PRIORITY).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let started = Instant::now();
        tokio::time::timeout(Duration::from_secs(30), running)
            .await
            .expect("the worker handled all 40 messages")
            .unwrap()
            .expect("the worker did not exit with an error");
        let mut handled = handled.lock().unwrap().clone();
        handled.sort();
        sent.sort();
        assert_eq!(
            handled,
            sent,
            "every message handled once ({:?} after the last send)",
            started.elapsed()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_key_names_are_refused() {
    for bad in ["", "a b", "{x}", ".hidden", "a\nb"] {
        let mut options = Setup::REDIS_RS.options("ok");
        options.key = bad.to_owned();
        let err = RedisSetDriver::connect_redis(&redis_url(), options)
            .await
            .unwrap_err();
        assert!(
            matches!(err, hermes_core::Error::InvalidQueueName { .. }),
            "{bad:?}: {err}"
        );
    }
    let driver = Setup::REDIS_RS
        .connect(Setup::REDIS_RS.options("ok"))
        .await
        .unwrap();
    assert!(driver.setup_priority_queue("x y", 5).is_err());
    let err = RedisSetDriver::connect_redis("nonsense://", Setup::REDIS_RS.options("ok"))
        .await
        .unwrap_err();
    assert!(matches!(err, hermes_core::Error::Config { .. }), "{err}");
    let err = RedisSetDriver::connect_redis("redis://127.0.0.1:1", Setup::REDIS_RS.options("ok"))
        .await
        .unwrap_err();
    assert!(err.is_temporary(), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_acknowledgement_reaches_redis_within_the_ack_delay() {
    both(async |setup, queue| {
        let driver = setup.connect(setup.options(&queue)).await.unwrap();
        let m = Message::new("t");
        driver.send(&m, DEFAULT_PRIORITY).await.unwrap();
        let d = driver
            .receive(&[], Duration::from_secs(2))
            .await
            .unwrap()
            .unwrap();
        let in_flight = format!("{queue}_in_flight");
        assert_eq!(redis_cli(&["ZCARD", &in_flight]).trim(), "1", "claimed");
        driver.ack(&d).await.unwrap();
        tokio::time::sleep(hermes_redis::ACK_DELAY + Duration::from_millis(200)).await;
        assert_eq!(
            redis_cli(&["ZCARD", &in_flight]).trim(),
            "0",
            "removed without another receive"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_are_loaded_again_after_the_script_cache_is_flushed() {
    both(async |setup, queue| {
        let driver = setup.connect(setup.options(&queue)).await.unwrap();
        let first = Message::new("t");
        driver.send(&first, DEFAULT_PRIORITY).await.unwrap();
        let d = driver
            .receive(&[], Duration::from_secs(2))
            .await
            .unwrap()
            .unwrap();
        driver.ack(&d).await.unwrap();
        assert_eq!(redis_cli(&["SCRIPT", "FLUSH"]).trim(), "OK");
        let second = Message::builder("t")
            .delay(Duration::from_millis(200))
            .build()
            .unwrap();
        driver.send(&second, DEFAULT_PRIORITY).await.unwrap();
        let d = driver
            .receive(&[], Duration::from_secs(3))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(d.message().id(), second.id());
        driver.ack(&d).await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serializer_given_is_used() {
    for setup in [Setup::REDIS_RS, Setup::FRED] {
        let queue = unique_queue_name("serializer");
        let plain = setup.connect(setup.options(&queue)).await.unwrap();
        let tagged = setup
            .connect(setup.options(&queue))
            .await
            .unwrap()
            .with_serializer(hermes_testkit::TaggedSerializer);
        hermes_testkit::check_serializer_is_used(&plain, &tagged).await;
        cleanup(&queue).await;
    }
}

/// A rate with ample room records starts ahead in a batch, scored at the end of the time they
/// are used within, so each counts for a whole period after its run begins; near the rate's
/// number it records one at a time, scored now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_with_room_records_starts_ahead_in_a_batch() {
    both(async |setup, queue| {
        let driver = setup.connect(setup.options(&queue)).await.unwrap();
        let store = driver.limits().expect("the limits facet");
        let rate = Bound::Starts {
            name: format!("{queue}-fast"),
            rate: Rate::new(100, Duration::from_secs(10)),
        };
        let within = Duration::from_secs(3);
        let (admission, recorded) = store
            .admit_starts("a", std::slice::from_ref(&rate), 16, within)
            .await
            .unwrap();
        assert_eq!((admission, recorded), (Admission::Admitted, 16));
        let key = setup.key(&queue, &format!("{queue}_limit:{queue}-fast"));
        let now_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as f64;
        let scores: Vec<(String, f64)> = setup
            .cmd(&[b"ZRANGE", key.as_bytes(), b"0", b"-1", b"WITHSCORES"])
            .await;
        let scores: Vec<f64> = scores.into_iter().map(|(_, score)| score).collect();
        assert_eq!(scores.len(), 16);
        for score in scores {
            assert!(
                score > now_ms + 2_000.0 && score < now_ms + 4_000.0,
                "a start recorded ahead is scored {} ms from now",
                score - now_ms
            );
        }
        let ttl: i64 = setup.cmd(&[b"PTTL", key.as_bytes()]).await;
        assert!(ttl > 12_000, "the rate's key lives {ttl} ms");

        let tight = Bound::Starts {
            name: format!("{queue}-tight"),
            rate: Rate::new(3, Duration::from_secs(10)),
        };
        let (_, recorded) = store
            .admit_starts("b", std::slice::from_ref(&tight), 16, within)
            .await
            .unwrap();
        assert_eq!(recorded, 1, "half of a room of 3 is one start");
        let tight_key = setup.key(&queue, &format!("{queue}_limit:{queue}-tight"));
        cmd::<i64>(&[b"DEL", key.as_bytes(), tight_key.as_bytes()]).await;
    })
    .await;
}
