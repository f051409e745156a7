//! `rediss://` against a Redis of the test's own that speaks TLS alone, with a certificate
//! signed by a certificate authority made for the test and given with `tls_ca`, on both
//! clients: messages go and come back, an idle worker is woken over TLS, and a certificate
//! the driver cannot trust is a permanent error that names neither it nor the password.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::own_redis::{PASSWORD, free_port};
use hermes_core::{DEFAULT_PRIORITY, Driver, Error, Message};
use hermes_redis::RedisSetDriver;

/// A `redis-server` that accepts TLS connections only, killed when dropped.
struct TlsRedis {
    child: Child,
    port: u16,
    dir: PathBuf,
}

/// Runs `openssl` with `args` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is installed");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A certificate authority `name` (`name.pem`, `name.key`) in `dir`.
fn authority(dir: &Path, name: &str) {
    let (key, pem) = (format!("{name}.key"), format!("{name}.pem"));
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &pem,
            "-days",
            "2",
            "-subj",
            "/CN=hermes test authority",
        ],
    );
}

impl TlsRedis {
    fn start() -> TlsRedis {
        let dir = std::env::temp_dir().join(format!(
            "hermes-tls-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        authority(&dir, "ca");
        authority(&dir, "stranger");
        openssl(
            &dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        );
        std::fs::write(
            dir.join("san.cnf"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .unwrap();
        openssl(
            &dir,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.pem",
                "-days",
                "2",
                "-extfile",
                "san.cnf",
            ],
        );
        let port = free_port();
        let child = Command::new("redis-server")
            .current_dir(&dir)
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                "0",
                "--tls-port",
                &port.to_string(),
            ])
            .args([
                "--tls-cert-file",
                "server.pem",
                "--tls-key-file",
                "server.key",
            ])
            .args(["--tls-ca-cert-file", "ca.pem", "--tls-auth-clients", "no"])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--requirepass",
                PASSWORD,
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is installed (the test command installs it)");
        let server = TlsRedis { child, port, dir };
        let started = Instant::now();
        while !server.answers() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server with TLS did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn answers(&self) -> bool {
        Command::new("redis-cli")
            .args(["--tls", "--cacert"])
            .arg(self.dir.join("ca.pem"))
            .args([
                "-p",
                &self.port.to_string(),
                "-a",
                PASSWORD,
                "--no-auth-warning",
                "PING",
            ])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "PONG")
    }

    fn url(&self, client: &str, authority: &str, queue: &str) -> String {
        format!(
            "rediss://:{PASSWORD}@127.0.0.1:{}/0?key={queue}&schedule_key={queue}_schedule\
             &client={client}&refresh_interval=10&tls_ca={}",
            self.port,
            self.dir.join(format!("{authority}.pem")).display()
        )
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_with_the_servers_authority_carries_messages_and_wake_ups() {
    let server = TlsRedis::start();
    for client in ["redis", "fred"] {
        let queue = format!("t-tls-{client}");
        let worker = RedisSetDriver::from_url(&server.url(client, "ca", &queue))
            .await
            .expect("connecting over TLS");
        let emitter = RedisSetDriver::from_url(&server.url(client, "ca", &queue))
            .await
            .expect("connecting over TLS");
        for round in 0..3 {
            // The worker waits (its refresh interval is 10 s): only a wake-up over TLS ends
            // its wait within the second.
            let waiting = {
                let worker = worker.clone();
                tokio::spawn(async move {
                    let delivery = worker
                        .receive(&[], Duration::from_secs(5))
                        .await
                        .expect("receiving over TLS")
                        .expect("a message");
                    worker.ack(&delivery).await.expect("acknowledging");
                    delivery.message().id().to_owned()
                })
            };
            tokio::time::sleep(Duration::from_millis(200)).await;
            let sent = Instant::now();
            let message = Message::builder("tls")
                .id(format!("{client}-{round}"))
                .build()
                .unwrap();
            emitter
                .send(&message, DEFAULT_PRIORITY)
                .await
                .expect("sending over TLS");
            let taken = tokio::time::timeout(Duration::from_secs(1), waiting)
                .await
                .expect("the idle worker was woken within a second")
                .unwrap();
            assert_eq!(taken, message.id());
            assert!(
                sent.elapsed() < Duration::from_secs(1),
                "{:?}",
                sent.elapsed()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_permanent_and_names_no_secret() {
    let server = TlsRedis::start();
    for client in ["redis", "fred"] {
        let started = Instant::now();
        let err = RedisSetDriver::from_url(&server.url(client, "stranger", "t-tls-refused"))
            .await
            .expect_err("a server whose certificate another authority signed");
        let text = format!("{err} {err:?}");
        assert!(!err.is_temporary(), "{client}: retried as lost: {text}");
        assert!(matches!(err, Error::Config { .. }), "{client}: {text}");
        assert!(text.contains("not trusted"), "{client}: {text}");
        assert!(!text.contains(PASSWORD), "{client}: {text}");
        assert!(!text.contains("BEGIN CERTIFICATE"), "{client}: {text}");
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "{:?}",
            started.elapsed()
        );
    }
    let plain = format!(
        "redis://:{PASSWORD}@127.0.0.1:{}/0?tls_ca=/tmp/ca.pem",
        server.port
    );
    let err = RedisSetDriver::from_url(&plain).await.unwrap_err();
    assert!(err.to_string().contains("rediss://"), "{err}");
}
