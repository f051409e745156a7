//! Wake-ups on real Redis (both clients, and the Cluster): an idle worker whose refresh interval
//! is long takes a message a Rust emitter sent at once, a delayed one when it is due, and a
//! PHP emitter's at its next look; two idle workers both take part in a burst; the wake list
//! holds one token at most and expires; with wake-ups off the worker only polls.

mod common;

use std::time::{Duration, Instant};

use common::{Library, Setup};
use hermes_core::{DEFAULT_PRIORITY, Driver, JsonSerializer, Message, Serializer};
use hermes_redis::{DeliveryMode, RedisOptions, RedisSetDriver};
use hermes_testkit::suite::unique_queue_name;

/// Longer than any wait below: a receive that returns sooner was woken.
const REFRESH: Duration = Duration::from_secs(3);

const TRICKLE: usize = 100;

const SETUPS: [Setup; 3] = [
    Setup::REDIS_RS,
    Setup::FRED,
    Setup {
        library: Library::RedisRs,
        mode: DeliveryMode::AtLeastOnce,
        cluster: true,
        immediate_acks: false,
    },
];

fn options(setup: &Setup, queue: &str) -> RedisOptions {
    let mut options = setup.options(queue);
    options.refresh_interval = REFRESH;
    options.visibility_timeout = Duration::from_secs(30);
    options.prefetch = 1;
    options
}

async fn open(setup: &Setup, queue: &str) -> RedisSetDriver {
    setup
        .connect(options(setup, queue))
        .await
        .expect("Redis is reachable")
}

async fn cleanup(setup: &Setup, queue: &str) {
    for suffix in ["", "_schedule", "_in_flight", "_wake", "_workers"] {
        let key = setup.key(queue, &format!("{queue}{suffix}"));
        setup.cmd::<i64>(&[b"DEL", key.as_bytes()]).await;
    }
}

/// Starts a receive on `worker` and lets it reach its wait: a first claim found nothing.
fn waiting_receive(worker: &RedisSetDriver) -> tokio::task::JoinHandle<Option<(String, Duration)>> {
    let worker = worker.clone();
    tokio::spawn(async move {
        let start = Instant::now();
        let delivery = worker
            .receive(&[], Duration::from_secs(20))
            .await
            .expect("receiving")?;
        worker.ack(&delivery).await.expect("acknowledging");
        Some((delivery.message().id().to_owned(), start.elapsed()))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_emit_wakes_an_idle_worker_at_once() {
    for setup in SETUPS {
        let queue = unique_queue_name("wake");
        let worker = open(&setup, &queue).await;
        let emitter = open(&setup, &queue).await;
        // Several rounds: the worker waits again after each message.
        for round in 0..3 {
            let receive = waiting_receive(&worker);
            tokio::time::sleep(Duration::from_millis(300)).await;
            let sent = Instant::now();
            let message = Message::builder("wake")
                .id(format!("m-{round}"))
                .build()
                .unwrap();
            emitter.send(&message, DEFAULT_PRIORITY).await.unwrap();
            let (id, _) = receive.await.unwrap().expect("a message");
            assert_eq!(id, format!("m-{round}"));
            let took = sent.elapsed();
            assert!(
                took < Duration::from_secs(1),
                "{setup:?}: woken {took:?} after the send, not at the refresh ({REFRESH:?})"
            );
        }
        let wake = setup.key(&queue, &format!("{queue}_wake"));
        let length: i64 = setup.cmd(&[b"LLEN", wake.as_bytes()]).await;
        assert!(length <= 1, "one token at most: {length}");
        cleanup(&setup, &queue).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_message_is_taken_when_due_not_at_the_next_refresh() {
    for setup in SETUPS {
        let queue = unique_queue_name("wake-delayed");
        let worker = open(&setup, &queue).await;
        let emitter = open(&setup, &queue).await;
        let receive = waiting_receive(&worker);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let sent = Instant::now();
        let message = Message::builder("later")
            .id("later")
            .execute_at(hermes_core::time::unix_now() + 0.7)
            .build()
            .unwrap();
        emitter.send(&message, DEFAULT_PRIORITY).await.unwrap();
        let (id, _) = receive.await.unwrap().expect("a message");
        assert_eq!(id, "later");
        let took = sent.elapsed();
        assert!(
            took >= Duration::from_millis(650) && took < Duration::from_millis(1800),
            "{setup:?}: taken {took:?} after the send, due after 700 ms"
        );
        cleanup(&setup, &queue).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_php_emitters_message_is_found_at_the_next_look() {
    for setup in SETUPS {
        let queue = unique_queue_name("wake-php");
        let mut options = options(&setup, &queue);
        options.refresh_interval = Duration::from_millis(400);
        let worker = setup.connect(options).await.expect("Redis is reachable");
        let receive = waiting_receive(&worker);
        tokio::time::sleep(Duration::from_millis(200)).await;
        // What a PHP emitter does: SADD of Hermes' JSON, and nothing else.
        let body = JsonSerializer
            .serialize(&Message::builder("php").id("from-php").build().unwrap())
            .unwrap();
        let set = setup.key(&queue, &queue);
        setup.cmd::<i64>(&[b"SADD", set.as_bytes(), &body]).await;
        let (id, took) = receive.await.unwrap().expect("a message");
        assert_eq!(id, "from-php");
        assert!(took < Duration::from_secs(2), "{setup:?}: {took:?}");
        cleanup(&setup, &queue).await;
    }
}

/// With keyspace wake-ups on a server that publishes the events, a PHP emitter's message (a
/// bare `SADD`) and a delayed one (a bare `ZADD`) are taken at once, though the refresh
/// interval is long; a cluster refuses the option.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyspace_events_wake_a_worker_for_a_php_emitter() {
    use common::own_redis::{OwnRedis, PASSWORD, free_port};

    let server = OwnRedis::start_with(free_port(), &["--notify-keyspace-events", "Ksz"]);
    let mut raw = redis::Client::open(server.url(PASSWORD))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("the server of this test");
    for client in ["redis", "fred"] {
        let queue = unique_queue_name("keyspace");
        let url = format!(
            "{}0?key={queue}&schedule_key={queue}_schedule&client={client}\
             &refresh_interval=10&prefetch=1&keyspace_wake_ups=true",
            server.url(PASSWORD)
        );
        let worker = RedisSetDriver::from_url(&url).await.expect("connecting");
        // A message due now, then one due in half a second.
        for (id, delay) in [("php-now", 0.0), ("php-later", 0.5)] {
            let receive = waiting_receive(&worker);
            tokio::time::sleep(Duration::from_millis(300)).await;
            let body = JsonSerializer
                .serialize(&Message::builder("php").id(id).build().unwrap())
                .unwrap();
            if delay > 0.0 {
                let due = hermes_core::time::unix_now() + delay;
                let _: i64 = redis::cmd("ZADD")
                    .arg(format!("{queue}_schedule"))
                    .arg(due)
                    .arg(&body)
                    .query_async(&mut raw)
                    .await
                    .unwrap();
            } else {
                let _: i64 = redis::cmd("SADD")
                    .arg(&queue)
                    .arg(&body)
                    .query_async(&mut raw)
                    .await
                    .unwrap();
            }
            let (taken, took) = receive.await.unwrap().expect("a message");
            assert_eq!(taken, id);
            let limit = Duration::from_secs_f64(0.3 + delay + 0.4);
            assert!(took < limit, "{client}: {id} was taken after {took:?}");
        }
    }
    let cluster = format!(
        "{}?hash_tag=t&keyspace_wake_ups=true",
        common::cluster_url().replacen("redis://", "redis+cluster://", 1)
    );
    let Err(refused) = RedisSetDriver::from_url(&cluster).await else {
        panic!("keyspace wake-ups on a cluster were accepted");
    };
    assert!(
        refused.to_string().contains("keyspace_wake_ups"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_idle_workers_both_take_part_in_a_burst() {
    for setup in SETUPS {
        let queue = unique_queue_name("wake-burst");
        let first = open(&setup, &queue).await;
        let second = open(&setup, &queue).await;
        let emitter = open(&setup, &queue).await;
        let one = waiting_receive(&first);
        let two = waiting_receive(&second);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let sent = Instant::now();
        for id in ["a", "b"] {
            let message = Message::builder("burst").id(id).build().unwrap();
            emitter.send(&message, DEFAULT_PRIORITY).await.unwrap();
        }
        let mut ids = vec![
            one.await.unwrap().expect("a message").0,
            two.await.unwrap().expect("a message").0,
        ];
        ids.sort();
        assert_eq!(ids, ["a", "b"]);
        let took = sent.elapsed();
        assert!(
            took < Duration::from_secs(1),
            "{setup:?}: both woken within {took:?}, not at the refresh"
        );
        cleanup(&setup, &queue).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_wake_ups_nothing_is_poked_and_the_worker_polls() {
    let setup = Setup::REDIS_RS;
    let queue = unique_queue_name("wake-off");
    let mut options = options(&setup, &queue);
    options.wake_ups = false;
    options.refresh_interval = Duration::from_millis(300);
    let worker = setup.connect(options.clone()).await.expect("Redis");
    let emitter = setup.connect(options).await.expect("Redis");
    let receive = waiting_receive(&worker);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let message = Message::builder("plain").id("plain").build().unwrap();
    emitter.send(&message, DEFAULT_PRIORITY).await.unwrap();
    let (id, _) = receive.await.unwrap().expect("a message");
    assert_eq!(id, "plain");
    let wake = format!("{queue}_wake");
    let exists: i64 = setup.cmd(&[b"EXISTS", wake.as_bytes()]).await;
    assert_eq!(exists, 0, "no wake list without wake-ups");
    cleanup(&setup, &queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wake_list_expires_when_no_worker_takes_its_token() {
    let setup = Setup::FRED;
    let queue = unique_queue_name("wake-ttl");
    let emitter = open(&setup, &queue).await;
    for n in 0..50 {
        let message = Message::builder("x").id(format!("m-{n}")).build().unwrap();
        emitter.send(&message, DEFAULT_PRIORITY).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let wake = format!("{queue}_wake");
    let length: i64 = setup.cmd(&[b"LLEN", wake.as_bytes()]).await;
    assert_eq!(length, 1, "one token, however many sends");
    let ttl: i64 = setup.cmd(&[b"PTTL", wake.as_bytes()]).await;
    assert!(ttl > 0 && ttl <= 60_000, "{ttl}");
    cleanup(&setup, &queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatcher_takes_a_trickle_as_it_comes() {
    for setup in SETUPS {
        let queue = unique_queue_name("wake-trickle");
        let worker = open(&setup, &queue).await;
        let emitter = open(&setup, &queue).await;
        let handled = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = handled.clone();
        let mut dispatcher = hermes_core::Dispatcher::new(worker).max_items(TRICKLE as u64);
        dispatcher.register_fn("trickle", move |_m| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { Ok(true) }
        });
        let running = tokio::spawn(async move { dispatcher.handle(&[]).await });
        let start = Instant::now();
        for n in 0..TRICKLE {
            let message = Message::builder("trickle")
                .id(format!("t-{n}"))
                .build()
                .unwrap();
            emitter.send(&message, DEFAULT_PRIORITY).await.unwrap();
            tokio::time::sleep(Duration::from_millis(7)).await;
        }
        tokio::time::timeout(Duration::from_secs(20), running)
            .await
            .expect("the dispatcher finished")
            .unwrap()
            .unwrap();
        let took = start.elapsed();
        let sending = Duration::from_millis(7) * TRICKLE as u32;
        assert!(
            took < sending + Duration::from_secs(1),
            "{setup:?}: {TRICKLE} messages 7 ms apart took {took:?}, not refreshes of {REFRESH:?}"
        );
        cleanup(&setup, &queue).await;
    }
}
