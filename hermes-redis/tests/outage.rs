//! A Redis of the test's own (its own port, a password): refused credentials are permanent
//! errors that name no credential, and every call keeps its documented bound while Redis is
//! gone or frozen.

mod common;

use std::time::{Duration, Instant};

use common::own_redis::{OwnRedis, PASSWORD};

use hermes_core::driver::CALL_TIMEOUT;
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, Message};
use hermes_redis::{RedisOptions, RedisSetDriver};

async fn connect(fred: bool, url: &str) -> Result<RedisSetDriver, Error> {
    if fred {
        RedisSetDriver::connect_fred(url, RedisOptions::default()).await
    } else {
        RedisSetDriver::connect_redis(url, RedisOptions::default()).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_a_permanent_error_naming_no_password() {
    let redis = OwnRedis::start();
    for fred in [false, true] {
        let started = Instant::now();
        let err = connect(fred, &redis.url("wrong-pass")).await.unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(!err.is_temporary(), "fred {fred}: retried as lost: {text}");
        assert!(matches!(err, Error::Config { .. }), "fred {fred}: {text}");
        assert!(text.contains("credentials"), "{text}");
        assert!(
            !text.contains("wrong-pass") && !text.contains(PASSWORD),
            "{text}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        let driver = connect(fred, &redis.url(PASSWORD)).await.unwrap();
        driver
            .send(&Message::new("t"), DEFAULT_PRIORITY)
            .await
            .unwrap();
        assert!(!format!("{driver:?}").contains(PASSWORD));
    }
}

/// Every call returns within CALL_TIMEOUT (plus a little) with a temporary error, while Redis
/// is frozen (SIGSTOP) and after it is gone (SIGKILL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_keep_their_bound_while_redis_is_frozen_or_gone() {
    let bound = CALL_TIMEOUT + Duration::from_millis(500);
    for fred in [false, true] {
        let redis = OwnRedis::start();
        let driver = connect(fred, &redis.url(PASSWORD)).await.unwrap();
        driver
            .send(&Message::new("t"), DEFAULT_PRIORITY)
            .await
            .unwrap();
        for (signal, state) in [("-STOP", "frozen"), ("-KILL", "gone")] {
            redis.signal(signal);
            // Once Redis is gone, the first call fails at once (a broken pipe); the next ones
            // wait for reconnection attempts, which the bound cuts.
            let attempts = if state == "gone" { 2 } else { 1 };
            for attempt in 0..attempts {
                let started = Instant::now();
                let err = driver
                    .send(&Message::new("t"), DEFAULT_PRIORITY)
                    .await
                    .unwrap_err();
                let took = started.elapsed();
                println!("fred {fred}, Redis {state}, emit {attempt}: {took:?}: {err}");
                assert!(took <= bound, "fred {fred}, {state}: an emit took {took:?}");
                assert!(err.is_temporary(), "{err}");
                let started = Instant::now();
                let result = driver.receive(&[], Duration::from_millis(100)).await;
                let took = started.elapsed();
                assert!(
                    took <= bound,
                    "fred {fred}, {state}: a receive took {took:?}"
                );
                assert!(result.is_err_and(|e| e.is_temporary()));
            }
        }
    }
}

/// A driver whose Redis was killed and started again on its port works again by itself, without
/// being built anew: the next calls after the restart succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_works_again_once_redis_is_back() {
    for fred in [false, true] {
        let redis = OwnRedis::start();
        let port = redis.port;
        let driver = connect(fred, &redis.url(PASSWORD)).await.unwrap();
        driver
            .send(&Message::new("before"), DEFAULT_PRIORITY)
            .await
            .unwrap();
        drop(redis);
        let err = driver
            .send(&Message::new("lost"), DEFAULT_PRIORITY)
            .await
            .unwrap_err();
        assert!(err.is_temporary(), "fred {fred}: {err}");

        let _redis = OwnRedis::start_on(port);
        let started = Instant::now();
        while let Err(e) = driver.send(&Message::new("after"), DEFAULT_PRIORITY).await {
            assert!(e.is_temporary(), "fred {fred}: {e}");
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "fred {fred}: still failing after the restart: {e}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        println!(
            "fred {fred}: emits again {:?} after the restart",
            started.elapsed()
        );
        let received = driver
            .receive(&[], Duration::from_secs(1))
            .await
            .unwrap()
            .expect("the message sent after the restart");
        assert_eq!(received.message().message_type(), "after");
    }
}
