//! The direct lane of `connect_redis`, on a Redis of the test's own: every call, on the lane or
//! on the multiplexed connection beside it, uses the URL's password and database; a call
//! dropped mid-way leaves no answer for the next; a driver works on in another runtime; and a
//! Redis restarted while the driver was idle costs no failed call.

mod common;

use std::time::Duration;

use common::own_redis::{OwnRedis, PASSWORD};
use hermes_core::inspect::QueueState;
use hermes_core::{DEFAULT_PRIORITY, Driver, Message};
use hermes_redis::{RedisOptions, RedisSetDriver};

fn options() -> RedisOptions {
    let mut options = RedisOptions::default();
    options.key = "lane".to_owned();
    options.schedule_key = "lane_schedule".to_owned();
    options
}

async fn connect(url: &str) -> RedisSetDriver {
    RedisSetDriver::connect_redis(url, options())
        .await
        .expect("the test's Redis is reachable")
}

/// How many members the set `key` holds in database `db` of `redis`, asked on a connection of
/// its own.
async fn members(redis: &OwnRedis, db: u8, key: &str) -> i64 {
    let client = redis::Client::open(format!("{}{db}", redis.url(PASSWORD))).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("SCARD")
        .arg(key)
        .query_async(&mut connection)
        .await
        .unwrap()
}

/// Sends `n` messages of `message_type` from as many tasks at once: one goes on the lane, the
/// others on the multiplexed connection.
async fn send_together(driver: &RedisSetDriver, n: usize, message_type: &'static str) {
    let sends = (0..n).map(|_| {
        let driver = driver.clone();
        tokio::spawn(async move {
            driver
                .send(&Message::new(message_type), DEFAULT_PRIORITY)
                .await
        })
    });
    for send in futures_util::future::join_all(sends).await {
        send.unwrap().expect("a send on either connection");
    }
}

/// Every message a receive loop takes until none is left, acknowledged.
async fn drain(driver: &RedisSetDriver) -> Vec<String> {
    let mut types = Vec::new();
    while let Some(delivery) = driver.receive(&[], Duration::ZERO).await.unwrap() {
        types.push(delivery.message().message_type().to_owned());
        driver.ack(&delivery).await.unwrap();
    }
    types.sort();
    types
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_uses_the_urls_password_and_database() {
    let redis = OwnRedis::start();
    let driver = connect(&format!("{}5", redis.url(PASSWORD))).await;
    driver
        .send(&Message::new("alone"), DEFAULT_PRIORITY)
        .await
        .unwrap();
    send_together(&driver, 8, "together").await;
    assert_eq!(members(&redis, 5, "lane").await, 9, "in database 5");
    assert_eq!(members(&redis, 0, "lane").await, 0, "none in database 0");
    let taken = drain(&driver).await;
    assert_eq!(taken.len(), 9, "{taken:?}");
    assert_eq!(members(&redis, 5, "lane").await, 0);
}

/// A send dropped while Redis is frozen closes the lane's connection: its answer, which comes
/// once Redis thaws, is not read as the answer to the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_dropped_mid_way_leaves_no_answer_for_the_next() {
    let redis = OwnRedis::start();
    let driver = connect(&redis.url(PASSWORD)).await;
    driver
        .send(&Message::new("before"), DEFAULT_PRIORITY)
        .await
        .unwrap();
    redis.signal("-STOP");
    let dropped = tokio::time::timeout(
        Duration::from_millis(300),
        driver.send(&Message::new("dropped"), DEFAULT_PRIORITY),
    )
    .await;
    assert!(dropped.is_err(), "the send waited for the frozen Redis");
    // Asked while Redis still sleeps: on the dropped send's connection, its answer would come
    // first, and a script answering an array would choke on it.
    let stats = tokio::spawn({
        let driver = driver.clone();
        async move { driver.inspect().unwrap().stats().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    redis.signal("-CONT");
    let stats = stats.await.unwrap().expect("stats after the dropped send");
    assert_eq!(stats.len(), 1, "one queue: {stats:?}");
    let waiting = stats[0].waiting.value().expect("counted on Redis");
    assert!((1..=2).contains(&waiting), "{stats:?}");
    driver
        .send(&Message::new("after"), DEFAULT_PRIORITY)
        .await
        .unwrap();
    let peeked = driver
        .browse()
        .unwrap()
        .peek(DEFAULT_PRIORITY, QueueState::Waiting, 10)
        .await
        .unwrap();
    assert_eq!(peeked.len() as u64, waiting + 1);
    let taken = drain(&driver).await;
    assert!(
        taken == ["after", "before"] || taken == ["after", "before", "dropped"],
        "{taken:?}"
    );
}

/// A driver built in one runtime and used in another, while the first sits idle (its sockets
/// are not watched then) and after it ended: its calls there succeed at once.
#[test]
fn a_driver_works_in_another_runtime() {
    let redis = OwnRedis::start();
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    let first = runtime();
    let driver = first.block_on(async {
        let driver = connect(&redis.url(PASSWORD)).await;
        driver
            .send(&Message::new("first runtime"), DEFAULT_PRIORITY)
            .await
            .unwrap();
        driver
    });
    let second = runtime();
    second.block_on(async {
        let started = std::time::Instant::now();
        driver
            .send(&Message::new("second runtime"), DEFAULT_PRIORITY)
            .await
            .expect("the first send in the second runtime");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    });
    drop(first);
    second.block_on(async {
        driver
            .send(&Message::new("first ended"), DEFAULT_PRIORITY)
            .await
            .expect("a send once the first runtime ended");
        assert_eq!(
            drain(&driver).await,
            ["first ended", "first runtime", "second runtime"]
        );
    });
}

/// Redis killed and started again on its port while the driver sat idle: the next calls, on
/// the lane and on the multiplexed connection, all succeed at the first attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restarted_while_idle_costs_no_failed_call() {
    let redis = OwnRedis::start();
    let port = redis.port;
    let driver = connect(&redis.url(PASSWORD)).await;
    driver
        .send(&Message::new("before"), DEFAULT_PRIORITY)
        .await
        .unwrap();
    drop(redis);
    let _redis = OwnRedis::start_on(port);
    // Time for the runtime to see the old connections closed.
    tokio::time::sleep(Duration::from_millis(200)).await;

    driver
        .send(&Message::new("after"), DEFAULT_PRIORITY)
        .await
        .expect("the first send after the restart");
    send_together(&driver, 4, "after, together").await;
    let taken = drain(&driver).await;
    assert_eq!(taken.len(), 5, "{taken:?}");
}

/// The ids of the clients of `redis` whose last command was an `SADD`: with wake-ups off, a
/// lone emitter's lane connection.
async fn lane_clients(redis: &OwnRedis) -> Vec<String> {
    let client = redis::Client::open(redis.url(PASSWORD)).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut connection)
        .await
        .unwrap();
    list.lines()
        .filter(|line| line.contains(" cmd=sadd "))
        .filter_map(|line| line.split(' ').find_map(|f| f.strip_prefix("id=")))
        .map(str::to_owned)
        .collect()
}

async fn admin(redis: &OwnRedis, args: &[&str]) {
    let client = redis::Client::open(redis.url(PASSWORD)).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    let () = command.query_async(&mut connection).await.unwrap();
}

/// A server that turned into a replica (`READONLY`, as after a failover behind the same
/// address) fails the send, and the next send goes on a new lane connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_turned_replica_is_left_for_a_new_connection() {
    let redis = OwnRedis::start();
    let other = OwnRedis::start();
    let mut quiet = options();
    quiet.wake_ups = false;
    let driver = RedisSetDriver::connect_redis(&redis.url(PASSWORD), quiet)
        .await
        .unwrap();
    driver
        .send(&Message::new("before"), DEFAULT_PRIORITY)
        .await
        .unwrap();
    let before = lane_clients(&redis).await;
    assert_eq!(before.len(), 1, "{before:?}");

    admin(&redis, &["REPLICAOF", "127.0.0.1", &other.port.to_string()]).await;
    let refused = driver
        .send(&Message::new("refused"), DEFAULT_PRIORITY)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("read only replica"),
        "{refused}"
    );
    admin(&redis, &["REPLICAOF", "NO", "ONE"]).await;

    driver
        .send(&Message::new("after"), DEFAULT_PRIORITY)
        .await
        .unwrap();
    let after = lane_clients(&redis).await;
    assert_eq!(after.len(), 1, "{after:?}");
    assert_ne!(after, before, "the lane kept the replica's connection");
}
