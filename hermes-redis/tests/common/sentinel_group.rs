//! A Redis watched by Sentinel, of a test's own: a master, a replica and three sentinels on
//! free loopback ports, with passwords (the sentinels' differs from the master's). The test
//! can kill the master and wait for the sentinels to promote the replica.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::own_redis::{OwnRedis, PASSWORD, free_port, wait_until_answers};

/// The master's name in the sentinels' configuration.
pub const MASTER: &str = "hermes";

/// The password of the sentinels.
pub const SENTINEL_PASSWORD: &str = "s3ntinel-pass";

/// How long the sentinels wait before they call an unanswering master down.
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);

/// A master, a replica and three sentinels, all stopped when dropped.
pub struct SentinelGroup {
    /// The servers; the master is the one the sentinels name (see [`SentinelGroup::master_port`]).
    pub servers: Vec<Option<OwnRedis>>,
    sentinels: Vec<(Child, u16, PathBuf)>,
}

/// The settings of both servers: each may be a replica of the other one day.
fn server_settings(extra: &[String]) -> Vec<String> {
    let mut settings = vec!["--masterauth".to_owned(), PASSWORD.to_owned()];
    settings.extend_from_slice(extra);
    settings
}

impl SentinelGroup {
    /// Starts the group and waits until the replica is in sync and every sentinel knows the
    /// replica and the two other sentinels.
    pub fn start() -> SentinelGroup {
        let settings = server_settings(&[]);
        let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
        let master = OwnRedis::start_with(free_port(), &settings);
        let replica_of = server_settings(&[
            "--replicaof".to_owned(),
            "127.0.0.1".to_owned(),
            master.port.to_string(),
        ]);
        let replica_of: Vec<&str> = replica_of.iter().map(String::as_str).collect();
        let replica = OwnRedis::start_with(free_port(), &replica_of);
        let master_port = master.port;
        let mut group = SentinelGroup {
            servers: vec![Some(master), Some(replica)],
            sentinels: Vec::new(),
        };
        for _ in 0..3 {
            group.sentinels.push(start_sentinel(master_port));
        }
        group.wait_until_watched();
        group
    }

    /// The `redis+sentinel://` URL of the group, for `client` (`redis` or `fred`), with
    /// `extra` parameters (`&name=value`).
    pub fn url(&self, client: &str, extra: &str) -> String {
        let sentinels: Vec<String> = self
            .sentinels
            .iter()
            .map(|(_, port, _)| format!("127.0.0.1:{port}"))
            .collect();
        format!(
            "redis+sentinel://:{PASSWORD}@{}/{MASTER}?sentinel_password={SENTINEL_PASSWORD}\
             &client={client}{extra}",
            sentinels.join(",")
        )
    }

    /// The port of the master every sentinel that answers names.
    pub fn master_port(&self) -> Option<u16> {
        let mut named = None;
        for (_, port, _) in &self.sentinels {
            let reply: Option<(String, u16)> = sentinel_query(
                *port,
                redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(MASTER),
            )
            .ok()
            .flatten();
            let port = reply.map(|(_, port)| port)?;
            if named.is_some_and(|n| n != port) {
                return None;
            }
            named = Some(port);
        }
        named
    }

    /// SIGKILLs the master: returns its port, and when it was killed.
    pub fn kill_master(&mut self) -> (u16, Instant) {
        let port = self.master_port().expect("the sentinels agree on a master");
        let server = self
            .servers
            .iter_mut()
            .find(|s| s.as_ref().is_some_and(|s| s.port == port))
            .expect("the master is one of the group's servers");
        server.as_ref().unwrap().signal("-KILL");
        *server = None;
        (port, Instant::now())
    }

    /// Waits until every sentinel names another master than `old`, at most `limit`: the new
    /// master's port.
    pub fn wait_for_failover(&self, old: u16, limit: Duration) -> u16 {
        let started = Instant::now();
        loop {
            if let Some(port) = self.master_port()
                && port != old
            {
                return port;
            }
            assert!(
                started.elapsed() < limit,
                "the sentinels did not promote the replica within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts a server in place of the killed master, empty, as a replica of the master on
    /// `master` (as a supervisor restarts an old master with the configuration the sentinels
    /// gave it; left to themselves, they take 10 s or more to turn a master that came back
    /// into a replica). On a new port: another test may have the old one by now.
    pub fn start_replica(&mut self, master: u16) {
        let settings = server_settings(&[
            "--replicaof".to_owned(),
            "127.0.0.1".to_owned(),
            master.to_string(),
        ]);
        let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
        let server = OwnRedis::start_with(free_port(), &settings);
        let slot = self
            .servers
            .iter_mut()
            .find(|s| s.is_none())
            .expect("a server was killed");
        *slot = Some(server);
    }

    /// Waits until the master `port` has a replica in sync, at most `limit`.
    pub fn wait_for_replica(&self, port: u16, limit: Duration) {
        let started = Instant::now();
        while !has_replica_in_sync(port) {
            assert!(
                started.elapsed() < limit,
                "the master on port {port} got no replica within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_until_watched(&self) {
        let master = self.servers[0].as_ref().unwrap().port;
        let started = Instant::now();
        loop {
            let ready = has_replica_in_sync(master)
                && self.sentinels.iter().all(|(_, port, _)| {
                    let count = |what: &str| {
                        sentinel_query::<Vec<redis::Value>>(
                            *port,
                            redis::cmd("SENTINEL").arg(what).arg(MASTER),
                        )
                        .map_or(0, |v| v.len())
                    };
                    count("replicas") == 1 && count("sentinels") == 2
                });
            if ready {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the sentinels did not see the replica and one another within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for SentinelGroup {
    fn drop(&mut self) {
        for (child, _, config) in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(config);
        }
    }
}

/// A sentinel watching the master on `master_port`, on a free port, with a configuration file
/// of its own (a sentinel rewrites it).
fn start_sentinel(master_port: u16) -> (Child, u16, PathBuf) {
    let port = free_port();
    let config = std::env::temp_dir().join(format!(
        "hermes-sentinel-{}-{port}.conf",
        std::process::id()
    ));
    let down_after = DOWN_AFTER.as_millis();
    std::fs::write(
        &config,
        format!(
            "port {port}\nbind 127.0.0.1\ndaemonize no\n\
             sentinel monitor {MASTER} 127.0.0.1 {master_port} 2\n\
             sentinel auth-pass {MASTER} {PASSWORD}\n\
             sentinel down-after-milliseconds {MASTER} {down_after}\n\
             sentinel failover-timeout {MASTER} 5000\n\
             sentinel parallel-syncs {MASTER} 1\n\
             requirepass {SENTINEL_PASSWORD}\n\
             sentinel sentinel-pass {SENTINEL_PASSWORD}\n"
        ),
    )
    .expect("a temporary folder to write in");
    let child = Command::new("redis-server")
        .arg(&config)
        .arg("--sentinel")
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server is installed (the test command installs it)");
    wait_until_answers(port);
    (child, port, config)
}

/// Asks the sentinel on `port` `command`.
fn sentinel_query<T: redis::FromRedisValue>(
    port: u16,
    command: &mut redis::Cmd,
) -> redis::RedisResult<T> {
    let client = redis::Client::open(format!("redis://:{SENTINEL_PASSWORD}@127.0.0.1:{port}"))?;
    let mut connection = client.get_connection_with_timeout(Duration::from_secs(1))?;
    command.query(&mut connection)
}

/// Whether the master on `port` has a replica whose link is up.
fn has_replica_in_sync(port: u16) -> bool {
    let Ok(client) = redis::Client::open(format!("redis://:{PASSWORD}@127.0.0.1:{port}")) else {
        return false;
    };
    let Ok(mut connection) = client.get_connection_with_timeout(Duration::from_secs(1)) else {
        return false;
    };
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut connection)
        .unwrap_or_default();
    info.contains("role:master") && info.contains("state=online")
}
