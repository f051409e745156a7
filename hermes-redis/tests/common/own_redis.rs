//! A `redis-server` of a test's own, on a free loopback port and with a password, that the
//! test can freeze, kill and start again on the same port.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The password of every [`OwnRedis`].
pub const PASSWORD: &str = "s3cret-pass";

/// A `redis-server` child on a free loopback port, killed when dropped.
pub struct OwnRedis {
    child: Child,
    pub port: u16,
}

impl OwnRedis {
    pub fn start() -> OwnRedis {
        OwnRedis::start_on(free_port())
    }

    /// A new server on `port`, as a restarted Redis comes back on its port.
    pub fn start_on(port: u16) -> OwnRedis {
        OwnRedis::start_with(port, &[])
    }

    /// A new server on `port`, with more settings (`--name value` pairs).
    pub fn start_with(port: u16, settings: &[&str]) -> OwnRedis {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--requirepass",
                PASSWORD,
            ])
            .args(settings)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is installed (the test command installs it)");
        let mut server = OwnRedis { child, port };
        wait_until_answers(port);
        assert!(
            server.child.try_wait().unwrap().is_none(),
            "redis-server exited: port {port} was taken"
        );
        server
    }

    pub fn url(&self, password: &str) -> String {
        format!("redis://:{password}@127.0.0.1:{}/", self.port)
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

/// A loopback port no one listens on.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until a Redis (or a sentinel) on `port` answers, 10 s at most.
pub fn wait_until_answers(port: u16) {
    let started = Instant::now();
    while !answers_ping(port) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "redis-server on port {port} did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a Redis on `port` answers a `PING` (with `-NOAUTH`, as it asks for a password): a
/// server that only accepts connections may still be starting.
fn answers_ping(port: u16) -> bool {
    use std::io::{Read, Write};

    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut reply = [0u8; 1];
    stream.write_all(b"PING\r\n").is_ok() && stream.read_exact(&mut reply).is_ok()
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.signal("-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
