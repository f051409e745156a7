//! `hermes::connect` opens every backend from its URL, against the real servers on loopback: a
//! message sent through the driver it gives comes back through a second one opened from the same
//! URL. Mistakes in a URL are errors that name them and never show the password.

use std::time::Duration;

use hermes::{AnyDriver, DEFAULT_PRIORITY, Driver, Message};
use hermes_testkit::suite::{available_or_skip, strict, unique_queue_name};

/// Opens `url` twice, sends through one and receives through the other; `Err` when the
/// backend cannot be reached (the test is then skipped, or fails under strictness).
async fn round_trip(url: &str) -> Result<(AnyDriver, String), String> {
    let open = async {
        let emitter = hermes::connect(url).await.map_err(|e| e.to_string())?;
        let inspect = emitter.inspect().ok_or("no figures")?;
        inspect.stats().await.map_err(|e| e.to_string())?;
        Ok::<_, String>(emitter)
    };
    let emitter = tokio::time::timeout(Duration::from_secs(10), open)
        .await
        .map_err(|_| "no answer within 10 s".to_owned())??;
    let message = Message::builder("connect.test")
        .payload(&serde_json::json!({"url": "checked"}))
        .build()
        .expect("a message");
    emitter
        .send(&message, DEFAULT_PRIORITY)
        .await
        .expect("sending");
    let worker = hermes::connect(url).await.expect("a second driver");
    let delivery = worker
        .receive(&[], Duration::from_secs(10))
        .await
        .expect("receiving")
        .expect("the message sent through the first driver");
    assert_eq!(delivery.message(), &message);
    worker.ack(&delivery).await.expect("acknowledging");
    worker.flush().await.expect("flushing");
    Ok((worker, emitter.name().to_owned()))
}

/// Runs [`round_trip`] on `url` as the test `name`, and checks the backend it found.
async fn opens(name: &str, url: &str, kind: fn(&AnyDriver) -> bool, driver_name: &str) {
    let result = round_trip(url).await;
    let reachable = result.as_ref().map(|_| ()).map_err(Clone::clone);
    if !available_or_skip(strict(), name, reachable) {
        return;
    }
    let (driver, found) = result.unwrap();
    assert!(kind(&driver), "{name}: {driver:?}");
    assert_eq!(found, driver_name);
}

#[tokio::test]
async fn a_directory() {
    let dir = std::env::temp_dir().join(unique_queue_name("connect"));
    let url = format!("file://{}?queue=jobs&visibility_timeout=30", dir.display());
    opens(
        "file://",
        &url,
        |d| matches!(d, AnyDriver::FileSystem(_)),
        "filesystem",
    )
    .await;
    std::fs::remove_dir_all(&dir).ok();
}

fn redis_server() -> String {
    std::env::var("HERMES_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

#[tokio::test]
async fn redis_on_either_client() {
    for (client, name) in [("redis", "redis"), ("fred", "redis-fred")] {
        let key = unique_queue_name(client);
        let url = format!(
            "{}/0?key={key}&schedule_key={key}_schedule&client={client}",
            redis_server()
        );
        opens("redis://", &url, |d| matches!(d, AnyDriver::Redis(_)), name).await;
    }
}

#[tokio::test]
async fn a_redis_cluster() {
    let node = std::env::var("HERMES_REDIS_CLUSTER_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:7001".to_owned())
        .replacen("redis://", "redis+cluster://", 1);
    let key = unique_queue_name("cluster");
    let url = format!("{node}?key={key}&schedule_key={key}_schedule&hash_tag={key}");
    opens(
        "redis+cluster://",
        &url,
        |d| matches!(d, AnyDriver::Redis(_)),
        "redis",
    )
    .await;
}

#[tokio::test]
async fn rabbitmq() {
    let server = std::env::var("HERMES_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    let url = format!("{server}?queue={}", unique_queue_name("connect"));
    opens(
        "amqp://",
        &url,
        |d| matches!(d, AnyDriver::RabbitMq(_)),
        "rabbitmq",
    )
    .await;
}

#[tokio::test]
async fn postgres() {
    let server = std::env::var("HERMES_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let url = format!(
        "{server}?queue={}&schema=hermes_connect",
        unique_queue_name("connect")
    );
    opens(
        "postgres://",
        &url,
        |d| matches!(d, AnyDriver::Postgres(_)),
        "postgres",
    )
    .await;
}

/// SQS takes its credentials from the environment, which a test may not change in its own
/// process: this test runs itself again in a child process with the local server's.
#[test]
fn sqs() {
    if std::env::var_os("HERMES_CONNECT_SQS_CHILD").is_some() {
        let endpoint = std::env::var("HERMES_SQS_ENDPOINT")
            .unwrap_or_else(|_| "http://127.0.0.1:4566".to_owned());
        assert!(
            endpoint.starts_with("http://127.0.0.1:"),
            "only a loopback server: {endpoint}"
        );
        let url = format!(
            "sqs://{}?endpoint={endpoint}&region=us-east-1",
            unique_queue_name("connect")
        );
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        runtime.block_on(opens(
            "sqs://",
            &url,
            |d| matches!(d, AnyDriver::Sqs(_)),
            "sqs",
        ));
        return;
    }
    let status = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", "sqs", "--nocapture"])
        .env("HERMES_CONNECT_SQS_CHILD", "1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .status()
        .expect("running the test in a child process");
    assert!(
        status.success(),
        "the SQS connect test failed in its child process"
    );
}

#[tokio::test]
async fn memory_urls_of_one_name_share_their_queues() {
    let name = unique_queue_name("memory");
    let first = hermes::connect(&format!("memory://{name}")).await.unwrap();
    let again = hermes::connect(&format!("memory://{name}")).await.unwrap();
    let other = hermes::connect(&format!("memory://{name}-other"))
        .await
        .unwrap();
    first
        .send(&Message::new("shared"), DEFAULT_PRIORITY)
        .await
        .unwrap();
    assert!(other.receive(&[], Duration::ZERO).await.unwrap().is_none());
    let delivery = again.receive(&[], Duration::ZERO).await.unwrap();
    assert_eq!(
        delivery.expect("the same queues").message().message_type(),
        "shared"
    );
}

#[tokio::test]
async fn mistakes_are_named_and_passwords_never_shown() {
    for (url, names) in [
        ("mysql://app:s3cret@127.0.0.1/jobs", "mysql://"),
        ("postgres://app:s3cret@127.0.0.1/jobs?colour=red", "colour"),
        (
            "postgres://app:s3cret@127.0.0.1/jobs?schema=Drop%20Table",
            "schema",
        ),
        ("s3cret@127.0.0.1", "scheme"),
        ("redis://:s3cret@127.0.0.1:6379/0?colour=red", "colour"),
        ("redis://:s3cret@127.0.0.1:6379/0?prefetch=many", "prefetch"),
        (
            "amqp://guest:s3cret@127.0.0.1:5672/%2f?prefetch=many",
            "prefetch",
        ),
        ("file:///tmp/hermes?durable=maybe", "durable"),
        ("sqs://jobs?region=Not A Region", "region"),
        ("memory://jobs?colour=red", "colour"),
    ] {
        let err = hermes::connect(url).await.expect_err(url).to_string();
        assert!(err.contains(names), "{url}: {err}");
        assert!(!err.contains("s3cret"), "{url}: {err}");
    }
}
