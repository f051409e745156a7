//! Emits inside the application's transaction, on both clients (tokio-postgres and sqlx) and
//! the client-neutral statement: a committed emit is handled once; a rolled-back one leaves no
//! row and wakes no one; a worker idle during the transaction claims the message soon after the
//! commit and not before; an emit in a transaction that then fails on a constraint leaves
//! nothing.

mod common;

use std::time::{Duration, Instant};

use common::{SCHEMA, options, postgres_url, raw};
use futures_util::StreamExt;
use hermes_core::{DEFAULT_PRIORITY, Driver, Message};
use hermes_postgres::{PostgresDriver, SqlValue};
use hermes_testkit::suite::{available_or_skip, strict, unique_queue_name};
use tokio::sync::mpsc;

/// The application's own table, in a schema of its own.
const USERS: &str = "hermes_tx_app.users";

/// The application's client.
#[derive(Debug, Clone, Copy)]
enum Client {
    TokioPostgres,
    Sqlx,
    /// tokio-postgres running the client-neutral statement by hand.
    Neutral,
}

const CLIENTS: [Client; 3] = [Client::TokioPostgres, Client::Sqlx, Client::Neutral];

/// How the application's transaction ends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum End {
    Commit,
    Rollback,
    /// A second insert of the same user fails on the primary key; then a commit is tried.
    BreakConstraint,
}

/// Skips (or fails, when strict) without a server; makes the application's table.
async fn setup(test: &str) -> bool {
    let client = raw().await;
    if !available_or_skip(
        strict(),
        test,
        client.as_ref().map(drop).map_err(Clone::clone),
    ) {
        return false;
    }
    let mut client = client.unwrap();
    let transaction = client.transaction().await.unwrap();
    transaction
        .batch_execute(
            "SELECT pg_advisory_xact_lock(7411);
             CREATE SCHEMA IF NOT EXISTS hermes_tx_app;
             CREATE TABLE IF NOT EXISTS hermes_tx_app.users (email text PRIMARY KEY);",
        )
        .await
        .unwrap();
    transaction.commit().await.unwrap();
    true
}

async fn driver(queue: &str) -> PostgresDriver {
    PostgresDriver::connect(&postgres_url(), queue, options())
        .await
        .expect("a driver")
}

fn message() -> Message {
    Message::builder("welcome-mail")
        .payload(&serde_json::json!({"to": "ada@example.com"}))
        .build()
        .unwrap()
}

/// In one transaction of `client`: inserts the user `email`, emits `message`, waits `hold`,
/// then ends as `end` says. Returns when the end returned.
async fn transaction(
    client: Client,
    driver: &PostgresDriver,
    email: &str,
    message: &Message,
    hold: Duration,
    end: End,
) -> (Instant, Instant) {
    let insert = format!("INSERT INTO {USERS} (email) VALUES ($1)");
    let ending;
    match client {
        Client::TokioPostgres | Client::Neutral => {
            let mut connection = raw().await.unwrap();
            let transaction = connection.transaction().await.unwrap();
            transaction.execute(&insert, &[&email]).await.unwrap();
            if let Client::Neutral = client {
                let statement = driver.emit_statement(message, DEFAULT_PRIORITY).unwrap();
                let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = statement
                    .params()
                    .iter()
                    .map(|value| -> &(dyn tokio_postgres::types::ToSql + Sync) {
                        match value {
                            SqlValue::Text(text) => text,
                            SqlValue::Integer(n) => n,
                            SqlValue::Double(x) => x,
                            SqlValue::Bytes(bytes) => bytes,
                            _ => unreachable!(),
                        }
                    })
                    .collect();
                transaction.execute(statement.sql(), &params).await.unwrap();
            } else {
                driver
                    .emit_in(&transaction, message, DEFAULT_PRIORITY)
                    .await
                    .unwrap();
            }
            if end == End::BreakConstraint {
                assert!(transaction.execute(&insert, &[&email]).await.is_err());
            }
            tokio::time::sleep(hold).await;
            ending = Instant::now();
            match end {
                End::Rollback => transaction.rollback().await.unwrap(),
                _ => {
                    let _ = transaction.commit().await;
                }
            }
        }
        Client::Sqlx => {
            let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&postgres_url())
                .await
                .unwrap();
            let mut transaction = sqlx::Connection::begin(&mut connection).await.unwrap();
            sqlx::query(&insert)
                .bind(email)
                .execute(&mut *transaction)
                .await
                .unwrap();
            driver
                .emit_in(&mut *transaction, message, DEFAULT_PRIORITY)
                .await
                .unwrap();
            if end == End::BreakConstraint {
                let again = sqlx::query(&insert)
                    .bind(email)
                    .execute(&mut *transaction)
                    .await;
                assert!(again.is_err());
            }
            tokio::time::sleep(hold).await;
            ending = Instant::now();
            match end {
                End::Rollback => transaction.rollback().await.unwrap(),
                _ => {
                    let _ = transaction.commit().await;
                }
            }
        }
    }
    (ending, Instant::now())
}

/// How many rows the queue `queue` has, and whether the user `email` exists.
async fn rows_and_user(queue: &str, email: &str) -> (i64, bool) {
    let client = raw().await.unwrap();
    let rows: i64 = client
        .query_one(
            &format!("SELECT count(*) FROM {SCHEMA}.jobs WHERE queue = $1"),
            &[&queue],
        )
        .await
        .unwrap()
        .get(0);
    let users: i64 = client
        .query_one(
            &format!("SELECT count(*) FROM {USERS} WHERE email = $1"),
            &[&email],
        )
        .await
        .unwrap()
        .get(0);
    (rows, users == 1)
}

/// Notifications about a queue on the schema's channel, from a connection of their own.
struct Notifications {
    _client: tokio_postgres::Client,
    received: mpsc::UnboundedReceiver<()>,
}

impl Notifications {
    /// Listens from now on.
    async fn of(queue: &str) -> Notifications {
        let (client, mut connection) =
            tokio_postgres::connect(&postgres_url(), tokio_postgres::NoTls)
                .await
                .unwrap();
        let (tx, received) = mpsc::unbounded_channel();
        let queue = queue.to_owned();
        tokio::spawn(async move {
            let mut messages = futures_util::stream::poll_fn(|cx| connection.poll_message(cx));
            while let Some(Ok(message)) = messages.next().await {
                if let tokio_postgres::AsyncMessage::Notification(n) = message
                    && n.payload() == queue
                {
                    let _ = tx.send(());
                }
            }
        });
        client
            .batch_execute(&format!("LISTEN hermes_{SCHEMA}"))
            .await
            .unwrap();
        Notifications {
            _client: client,
            received,
        }
    }

    /// Whether one came.
    fn any(&mut self) -> bool {
        self.received.try_recv().is_ok()
    }
}

#[tokio::test]
async fn a_committed_emit_is_handled_once() {
    if !setup("a_committed_emit_is_handled_once").await {
        return;
    }
    for client in CLIENTS {
        let queue = unique_queue_name("tx_commit");
        let driver = driver(&queue).await;
        let sent = message();
        transaction(client, &driver, &queue, &sent, Duration::ZERO, End::Commit).await;
        assert_eq!(rows_and_user(&queue, &queue).await, (1, true), "{client:?}");
        let delivery = driver
            .receive(&[], Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{client:?}: the committed message"));
        assert_eq!(delivery.message(), &sent, "{client:?}");
        driver.ack(&delivery).await.unwrap();
        let again = driver
            .receive(&[], Duration::from_millis(300))
            .await
            .unwrap();
        assert!(again.is_none(), "{client:?}: handled once");
    }
}

/// On every client: a transaction that emits and ends as `end` says leaves no row and no
/// user, nothing to handle, and woke no one.
async fn leaves_nothing(end: End, prefix: &str) {
    for client in CLIENTS {
        let queue = unique_queue_name(prefix);
        let driver = driver(&queue).await;
        let email = format!("{queue}@example.com");
        let mut notified = Notifications::of(&queue).await;
        transaction(client, &driver, &email, &message(), Duration::ZERO, end).await;
        assert_eq!(
            rows_and_user(&queue, &email).await,
            (0, false),
            "{client:?}"
        );
        let got = driver
            .receive(&[], Duration::from_millis(300))
            .await
            .unwrap();
        assert!(got.is_none(), "{client:?}: nothing to handle");
        assert!(!notified.any(), "{client:?}: no wake-up");
    }
}

#[tokio::test]
async fn a_rolled_back_emit_leaves_nothing_and_wakes_no_one() {
    if setup("a_rolled_back_emit_leaves_nothing_and_wakes_no_one").await {
        leaves_nothing(End::Rollback, "tx_rollback").await;
    }
}

#[tokio::test]
async fn a_failed_transaction_leaves_nothing() {
    if setup("a_failed_transaction_leaves_nothing").await {
        leaves_nothing(End::BreakConstraint, "tx_broken").await;
    }
}

#[tokio::test]
async fn an_idle_worker_wakes_at_the_commit_not_before() {
    if !setup("an_idle_worker_wakes_at_the_commit_not_before").await {
        return;
    }
    let mut after_commit = Vec::new();
    for client in CLIENTS {
        for _ in 0..3 {
            let queue = unique_queue_name("tx_wake");
            let driver = driver(&queue).await;
            let worker = driver.clone();
            // The worker is idle on an empty queue before the transaction begins.
            let waiting = tokio::spawn(async move {
                let delivery = worker.receive(&[], Duration::from_secs(10)).await;
                (Instant::now(), delivery)
            });
            tokio::time::sleep(Duration::from_millis(100)).await;
            let hold = Duration::from_millis(400);
            let started = Instant::now();
            let (committing, committed) =
                transaction(client, &driver, &queue, &message(), hold, End::Commit).await;
            let (claimed, delivery) = waiting.await.unwrap();
            assert!(delivery.unwrap().is_some(), "{client:?}: the message");
            assert!(
                claimed >= committing,
                "{client:?}: claimed {:?} after the transaction began, before its commit",
                claimed - started
            );
            after_commit.push(claimed.saturating_duration_since(committed));
        }
    }
    after_commit.sort();
    println!("claimed after the commit: {after_commit:?}");
    let worst = after_commit[after_commit.len() - 1];
    assert!(worst < Duration::from_millis(50), "{after_commit:?}");
}
