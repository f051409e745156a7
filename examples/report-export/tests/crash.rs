//! A worker killed with SIGKILL in the middle of a handler, on every backend: the export it
//! held runs again in the next worker (after the visibility timeout, or at once where the broker
//! sees the connection go), every other export runs exactly once, and nothing is lost. The
//! workers are the example's own program, told their queue by `HERMES_URL` alone.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use hermes::inspect::Figure;
use hermes::{AnyDriver, DEFAULT_PRIORITY, Driver};
use hermes_example::testing::{
    assert_each_exported_once, crash_test_reports, exits_cleanly, exported, slow_export,
    start_worker,
};
use hermes_testkit::suite::{available_or_skip, strict};

/// The claims of the backends that redeliver after a timeout last this long.
const VISIBILITY_SECONDS: u64 = 2;

/// A backend the test runs on.
struct Backend {
    name: &'static str,
    /// The URL of the queue `queue`, its files (where it has files) in `dir`.
    url: fn(queue: &str, dir: &Path) -> String,
    /// Whether a killed worker's export comes back only once its claim expires.
    claims_expire: bool,
}

/// The SQS-compatible server on loopback the SQS run uses (never AWS).
fn sqs_endpoint() -> String {
    let endpoint =
        std::env::var("HERMES_SQS_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:4566".to_owned());
    assert!(
        ["http://127.0.0.1:", "http://localhost:", "http://[::1]:"]
            .iter()
            .any(|p| endpoint.starts_with(p)),
        "HERMES_SQS_ENDPOINT must be a loopback http:// address for this test, not {endpoint}"
    );
    endpoint
}

/// The credentials the SQS run hands its workers (a local server accepts any).
const SQS_CREDENTIALS: [(&str, &str); 3] = [
    ("AWS_ACCESS_KEY_ID", "test"),
    ("AWS_SECRET_ACCESS_KEY", "test"),
    ("AWS_EC2_METADATA_DISABLED", "true"),
];

/// The emitter's driver: the URL's, but for SQS, whose client the test builds with the local
/// server's credentials (the URL's client takes them from the process's environment).
async fn open(backend: &Backend, url: &str, queue: &str) -> Result<AnyDriver, String> {
    if backend.name != "sqs" {
        return hermes::connect(url).await.map_err(|e| e.to_string());
    }
    use hermes::sqs::aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
    let config = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "crash-test"))
        .endpoint_url(sqs_endpoint())
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .load()
        .await;
    let mut options = hermes::sqs::SqsOptions::default();
    options.visibility_timeout = Some(Duration::from_secs(VISIBILITY_SECONDS));
    let client = hermes::sqs::aws_sdk_sqs::Client::new(&config);
    hermes::sqs::SqsDriver::with_options(client, queue, options)
        .map(AnyDriver::Sqs)
        .map_err(|e| e.to_string())
}

/// The default queue's figures as the backend counts them: how many messages wait, and how
/// many are claimed (`None` where the backend cannot tell, as RabbitMQ cannot).
async fn counts(driver: &AnyDriver) -> Result<(Option<u64>, Option<u64>), String> {
    let inspect = driver.inspect().ok_or("the backend has no figures")?;
    let stats = inspect.stats().await.map_err(|e| e.to_string())?;
    let queue = stats
        .iter()
        .find(|q| q.priority == DEFAULT_PRIORITY)
        .ok_or("no default queue in the figures")?;
    let value = |figure: Figure<u64>| match figure {
        Figure::Exact(n) | Figure::Approximate(n) => Some(n),
        _ => None,
    };
    Ok((value(queue.waiting), value(queue.in_flight)))
}

/// Polls `done` on the backend's figures every 100 ms, for at most `patience`.
async fn wait_for(
    driver: &AnyDriver,
    what: &str,
    patience: Duration,
    done: impl Fn(Option<u64>, Option<u64>) -> bool,
) {
    let give_up = Instant::now() + patience;
    loop {
        if let Ok((waiting, in_flight)) = counts(driver).await
            && done(waiting, in_flight)
        {
            return;
        }
        assert!(Instant::now() < give_up, "{what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn worker(dir: &Path, url: &str, urgent: &str, backend: &Backend) -> Child {
    let mut env = vec![("HERMES_URL", url), ("HERMES_URGENT_QUEUE", urgent)];
    if backend.name == "sqs" {
        env.extend(SQS_CREDENTIALS);
    }
    start_worker(env!("CARGO_BIN_EXE_worker"), dir, &env)
}

fn run(backend: &Backend) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(killed_mid_handler(backend));
}

async fn killed_mid_handler(backend: &Backend) {
    let queue = format!("crash-{}-{}", backend.name, std::process::id());
    let dir: PathBuf = std::env::temp_dir().join(&queue);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let url = (backend.url)(&queue, &dir);
    let urgent = format!("{queue}_high");
    let opened = tokio::time::timeout(Duration::from_secs(5), open(backend, &url, &queue)).await;
    let reachable = match &opened {
        Ok(Ok(driver)) => counts(driver).await.map(drop),
        Ok(Err(e)) => Err(e.clone()),
        Err(_) => Err(format!(
            "the {} backend did not answer within 5 s",
            backend.name
        )),
    };
    if !available_or_skip(strict(), backend.name, reachable) {
        return;
    }
    let emitter = opened.unwrap().unwrap();
    emitter
        .setup_priority_queue(&urgent, hermes_example::PRIORITY_HIGH)
        .unwrap();
    let send = async |report: &str, seconds: u64| {
        let message = slow_export(report, seconds);
        emitter.send(&message, DEFAULT_PRIORITY).await.unwrap();
    };

    // The first worker takes the slow export and is killed inside its handler.
    send("slow", 3).await;
    let mut first = worker(&dir, &url, &urgent, backend);
    // Taken: it waits no more, and its 3 s have not run out.
    let taken = format!("{}: the slow export was not taken", backend.name);
    wait_for(&emitter, &taken, Duration::from_secs(30), |waiting, _| {
        waiting == Some(0) && exported(&dir).is_empty()
    })
    .await;
    // The others arrive while it hangs there.
    let reports = crash_test_reports();
    for (report, seconds) in reports.iter().filter(|(r, _)| r != "slow") {
        send(report, *seconds).await;
    }
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    let killed_at = Instant::now();
    assert!(exported(&dir).is_empty(), "the slow export never finished");

    // The second worker runs the others at once, and the slow one again.
    let mut second = worker(&dir, &url, &urgent, backend);
    let done = assert_each_exported_once(&dir, &reports, Duration::from_secs(90));
    if backend.claims_expire {
        assert!(
            done - killed_at + Duration::from_millis(100)
                >= Duration::from_secs(VISIBILITY_SECONDS),
            "{}: the slow export ran again before its claim expired",
            backend.name
        );
    }
    let settled = format!("{}: a claim is left after every export ran", backend.name);
    wait_for(
        &emitter,
        &settled,
        Duration::from_secs(10),
        |_, in_flight| in_flight.is_none_or(|n| n == 0),
    )
    .await;

    // The signal the workers watch: the backend's own, or the file in their directory.
    let signal = emitter
        .shutdown_signal()
        .unwrap_or_else(|| Box::new(hermes::SharedFileShutdown::new(dir.join("shutdown"))));
    signal.shutdown(None).await.unwrap();
    assert!(
        exits_cleanly(&mut second, Duration::from_secs(10)),
        "{}: the second worker exits cleanly when asked",
        backend.name
    );
    remove_queues(&emitter, &queue).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Removes what the run left on a shared server: the queues `queue…` and their keys.
async fn remove_queues(driver: &AnyDriver, queue: &str) {
    match driver {
        AnyDriver::Redis(redis) => {
            let keys: Vec<String> = [
                "",
                "_high",
                "_schedule",
                "_in_flight",
                "_shutdown",
                "_workers",
            ]
            .iter()
            .map(|suffix| format!("{queue}{suffix}"))
            .collect();
            let args: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
            let _ = redis.client().command("DEL", &args).await;
        }
        AnyDriver::RabbitMq(_) => {
            let listed = std::process::Command::new("rabbitmqctl")
                .args(["-q", "list_queues", "name"])
                .output();
            let names = listed.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
            for name in names
                .unwrap_or_default()
                .lines()
                .filter(|n| n.starts_with(queue))
            {
                let _ = std::process::Command::new("rabbitmqctl")
                    .args(["-q", "delete_queue", name])
                    .output();
            }
        }
        AnyDriver::Sqs(sqs) => {
            for priority in [DEFAULT_PRIORITY, hermes_example::PRIORITY_HIGH] {
                if let Ok(url) = sqs.queue_url(priority).await {
                    let _ = sqs.client().delete_queue().queue_url(url).send().await;
                }
            }
        }
        _ => {}
    }
}

#[test]
fn filesystem() {
    run(&Backend {
        name: "filesystem",
        url: |queue, dir| {
            format!(
                "file://{}?queue={queue}&visibility_timeout={VISIBILITY_SECONDS}",
                dir.display()
            )
        },
        claims_expire: true,
    });
}

#[test]
fn redis() {
    for client in ["redis", "fred"] {
        let name = if client == "redis" {
            "redis"
        } else {
            "redis-fred"
        };
        run(&Backend {
            name,
            url: if client == "redis" {
                |queue, _| redis_url(queue, "redis")
            } else {
                |queue, _| redis_url(queue, "fred")
            },
            claims_expire: true,
        });
    }
}

fn redis_url(queue: &str, client: &str) -> String {
    let server =
        std::env::var("HERMES_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    format!(
        "{server}/0?key={queue}&schedule_key={queue}_schedule&client={client}\
         &visibility_timeout={VISIBILITY_SECONDS}"
    )
}

#[test]
fn rabbitmq() {
    run(&Backend {
        name: "rabbitmq",
        url: |queue, _| {
            let server = std::env::var("HERMES_AMQP_URL")
                .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
            format!("{server}?queue={queue}")
        },
        // The broker gives a dropped connection's messages back at once.
        claims_expire: false,
    });
}

#[test]
fn sqs() {
    run(&Backend {
        name: "sqs",
        url: |queue, _| {
            format!(
                "sqs://{queue}?endpoint={}&region=us-east-1&visibility_timeout={VISIBILITY_SECONDS}",
                sqs_endpoint()
            )
        },
        claims_expire: true,
    });
}
