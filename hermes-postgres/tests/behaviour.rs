//! The PostgreSQL driver beyond the conformance suite: its migrations, its refusals of bad
//! names and settings before any SQL is sent, and idle workers woken by the emit's commit or,
//! without `LISTEN`, polling.

mod common;

use std::time::{Duration, Instant};

use common::{options, postgres_url, raw};
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, Message};
use hermes_postgres::{PostgresDriver, SCHEMA_VERSION};

fn fresh(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_run_once_and_a_newer_schema_is_refused() {
    let schema = fresh("hermes_migrations");
    let mut options = options();
    options.schema = schema.clone();
    // Three processes starting at once: each migration runs once.
    let url = postgres_url();
    let opened = futures_util::future::join_all(
        (0..3).map(|_| PostgresDriver::connect(&url, "jobs", options.clone())),
    )
    .await;
    for driver in &opened {
        assert!(driver.is_ok(), "{:?}", driver.as_ref().err());
    }
    let client = raw().await.unwrap();
    let versions: i64 = client
        .query_one(&format!("SELECT count(*) FROM {schema}.migrations"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(versions, i64::from(SCHEMA_VERSION));

    // A schema a newer version of the code migrated.
    client
        .execute(
            &format!("INSERT INTO {schema}.migrations (version) VALUES ($1)"),
            &[&(SCHEMA_VERSION + 1)],
        )
        .await
        .unwrap();
    for migrate in [true, false] {
        options.migrate = migrate;
        let err = PostgresDriver::connect(&postgres_url(), "jobs", options.clone())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Config { .. }), "{err}");
        assert!(err.to_string().contains("newer"), "{err}");
    }
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_migrating_a_missing_schema_is_named() {
    let mut options = options();
    options.schema = fresh("hermes_missing");
    options.migrate = false;
    let err = PostgresDriver::connect(&postgres_url(), "jobs", options)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("hermes migrate"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_are_refused_before_any_sql() {
    for schema in ["Robert'); DROP TABLE students;--", "a\"b", "UPPER", ""] {
        let mut options = options();
        options.schema = schema.to_owned();
        // An address nothing listens on: a refusal that came from the server would be a
        // connection error instead.
        let err = PostgresDriver::connect("postgres://nobody@127.0.0.1:1/none", "jobs", options)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Config { .. }), "{schema:?}: {err}");
    }
    let err = PostgresDriver::connect("postgres://nobody@127.0.0.1:1/none", "a b", options())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidQueueName { .. }), "{err}");
    let err = PostgresDriver::from_url("postgres://u:hunter2@127.0.0.1:1/none?colour=red")
        .await
        .unwrap_err();
    assert!(!format!("{err} {err:?}").contains("hunter2"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_a_permanent_error_naming_no_password() {
    let client = raw().await.unwrap();
    let role = fresh("hermes_role");
    client
        .batch_execute(&format!("CREATE ROLE {role} LOGIN PASSWORD 'right-pass'"))
        .await
        .unwrap();
    // On a trust-auth server any password is taken; then there is nothing to refuse.
    let url = postgres_url().replacen("postgres@", &format!("{role}:wrong-pass@"), 1);
    let outcome = PostgresDriver::connect(&url, "jobs", options()).await;
    if let Err(err) = &outcome {
        let text = format!("{err} {err:?}");
        assert!(
            !text.contains("wrong-pass") && !text.contains("right-pass"),
            "{text}"
        );
    }
    client
        .batch_execute(&format!("DROP OWNED BY {role}; DROP ROLE {role}"))
        .await
        .unwrap();
}

/// An idle worker claims a message within 50 ms of the emit's commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_wakes_when_the_row_commits() {
    let queue = fresh("wake");
    let mut slow_polling = options();
    slow_polling.refresh_interval = Duration::from_secs(10);
    let worker = PostgresDriver::connect(&postgres_url(), &queue, slow_polling)
        .await
        .unwrap();
    let emitter = PostgresDriver::connect(&postgres_url(), &queue, options())
        .await
        .unwrap();
    // Once, so that the worker's listening connection is open.
    assert!(
        worker
            .receive(&[], Duration::from_millis(300))
            .await
            .unwrap()
            .is_none()
    );
    let mut waits = Vec::new();
    for _ in 0..10 {
        let receiving = {
            let worker = worker.clone();
            tokio::spawn(async move { worker.receive(&[], Duration::from_secs(5)).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let sent = Instant::now();
        emitter
            .send(&Message::new("wake"), DEFAULT_PRIORITY)
            .await
            .unwrap();
        let delivery = receiving.await.unwrap().unwrap().expect("woken");
        waits.push(sent.elapsed());
        worker.ack(&delivery).await.unwrap();
    }
    waits.sort();
    assert!(
        waits[waits.len() - 1] < Duration::from_millis(50),
        "{waits:?}"
    );
}

/// Without `LISTEN` (behind a pooler in transaction mode), an idle worker polls every refresh
/// interval: it finds a message within one interval, not at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_listen_an_idle_worker_polls() {
    let queue = fresh("poll");
    let mut polling = options();
    polling.listen = false;
    polling.refresh_interval = Duration::from_millis(400);
    let worker = PostgresDriver::connect(&postgres_url(), &queue, polling)
        .await
        .unwrap();
    let emitter = PostgresDriver::connect(&postgres_url(), &queue, options())
        .await
        .unwrap();
    let mut waits = Vec::new();
    for _ in 0..4 {
        let receiving = {
            let worker = worker.clone();
            tokio::spawn(async move { worker.receive(&[], Duration::from_secs(5)).await })
        };
        // Half an interval into the worker's wait.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let sent = Instant::now();
        emitter
            .send(&Message::new("poll"), DEFAULT_PRIORITY)
            .await
            .unwrap();
        let delivery = receiving.await.unwrap().unwrap().expect("found by polling");
        waits.push(sent.elapsed());
        worker.ack(&delivery).await.unwrap();
    }
    waits.sort();
    assert!(
        waits[waits.len() - 1] < Duration::from_millis(600),
        "{waits:?}"
    );
    assert!(
        waits[0] > Duration::from_millis(50),
        "woken, not polling: {waits:?}"
    );
}
