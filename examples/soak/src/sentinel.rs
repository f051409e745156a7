//! A Redis watched by Sentinel that a run starts itself: a master and a replica (each with AOF,
//! as the run's own Redis) and three sentinels, on free loopback ports. Its fault is a
//! failover: the master is SIGKILLed, the sentinels promote the replica, and an empty server
//! takes the old master's place as the new master's replica.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::broker::{OwnServer, ServerKind, free_port};

/// The master's name in the sentinels' configuration.
const MASTER: &str = "hermes";

/// How long a failover may take at most, and a new replica to get in sync.
const LIMIT: Duration = Duration::from_secs(30);

/// The servers and the sentinels, stopped when dropped.
#[derive(Debug)]
pub struct SentinelServers {
    folder: PathBuf,
    servers: Vec<OwnServer>,
    sentinels: Vec<(Child, u16)>,
}

impl SentinelServers {
    /// Starts them in `folder` and waits until the replica is in sync and the sentinels know
    /// it and one another.
    ///
    /// # Errors
    /// When a server cannot be started or the group does not come together within 30 s.
    pub fn start(folder: &Path) -> Result<Self, String> {
        let master = OwnServer::start(ServerKind::Redis, &folder.join("server-0"), Vec::new())?;
        let master_port = master.port();
        let mut group = SentinelServers {
            folder: folder.to_path_buf(),
            servers: vec![master],
            sentinels: Vec::new(),
        };
        group.start_replica(master_port)?;
        for i in 0..3 {
            group
                .sentinels
                .push(start_sentinel(folder, i, master_port)?);
        }
        wait_for("the sentinels to see the replica and one another", || {
            group.sentinels.iter().all(|(_, port)| {
                let count = |what: &str| {
                    redis_cli(*port, &["SENTINEL", what, MASTER])
                        .map_or(0, |out| out.lines().filter(|l| *l == "name").count())
                };
                count("replicas") >= 1 && count("sentinels") == 2
            })
        })?;
        Ok(group)
    }

    /// The `redis+sentinel://` URL of the group, with the replica wait on.
    pub fn url(&self) -> String {
        let sentinels: Vec<String> = self
            .sentinels
            .iter()
            .map(|(_, port)| format!("127.0.0.1:{port}"))
            .collect();
        format!(
            "redis+sentinel://{}/{MASTER}?replica_wait=1&replica_wait_timeout=0.5",
            sentinels.join(",")
        )
    }

    /// Fails over: kills the master, waits for the sentinels to promote the replica, and
    /// starts an empty replica of the new master in its place.
    ///
    /// # Errors
    /// When the sentinels disagree, do not promote the replica, or the new replica does not
    /// get in sync, within 30 s.
    pub fn fail_over(&mut self) -> Result<(), String> {
        let old = self
            .master_port()
            .ok_or("the sentinels do not agree on a master")?;
        self.servers.retain_mut(|server| {
            if server.port() == old {
                server.stop();
                false
            } else {
                true
            }
        });
        let mut new = None;
        wait_for("the sentinels to promote the replica", || {
            new = self.master_port().filter(|port| *port != old);
            new.is_some()
        })?;
        let new = new.expect("waited for");
        self.start_replica(new)?;
        wait_for("the new master to have a replica in sync", || {
            redis_cli(new, &["INFO", "replication"]).is_ok_and(|info| info.contains("state=online"))
        })
    }

    fn start_replica(&mut self, master: u16) -> Result<(), String> {
        let folder = self.folder.join(format!("server-{}", free_port()?));
        let settings = vec![
            "--replicaof".to_owned(),
            "127.0.0.1".to_owned(),
            master.to_string(),
        ];
        self.servers
            .push(OwnServer::start(ServerKind::Redis, &folder, settings)?);
        Ok(())
    }

    /// The master's port, when every sentinel names the same.
    fn master_port(&self) -> Option<u16> {
        let mut named = None;
        for (_, port) in &self.sentinels {
            let out = redis_cli(*port, &["SENTINEL", "get-master-addr-by-name", MASTER]).ok()?;
            let port: u16 = out.lines().nth(1)?.trim().parse().ok()?;
            if named.is_some_and(|n| n != port) {
                return None;
            }
            named = Some(port);
        }
        named
    }
}

impl Drop for SentinelServers {
    fn drop(&mut self) {
        for (child, _) in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Sentinel `i` of the group, watching the master on `master_port`.
fn start_sentinel(folder: &Path, i: usize, master_port: u16) -> Result<(Child, u16), String> {
    let port = free_port()?;
    let config = folder.join(format!("sentinel-{i}.conf"));
    std::fs::write(
        &config,
        format!(
            "port {port}\nbind 127.0.0.1\ndaemonize no\n\
             sentinel monitor {MASTER} 127.0.0.1 {master_port} 2\n\
             sentinel down-after-milliseconds {MASTER} 1000\n\
             sentinel failover-timeout {MASTER} 5000\n"
        ),
    )
    .map_err(|e| format!("cannot write {config:?}: {e}"))?;
    let child = Command::new("redis-server")
        .arg(&config)
        .arg("--sentinel")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start a sentinel (is redis-server installed?): {e}"))?;
    let sentinel = (child, port);
    wait_for("a sentinel to answer", || {
        redis_cli(port, &["PING"]).is_ok()
    })?;
    Ok(sentinel)
}

/// What `redis-cli -p port args…` printed, when it succeeded.
fn redis_cli(port: u16, args: &[&str]) -> Result<String, String> {
    let output = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .map_err(|e| format!("cannot run redis-cli: {e}"))?;
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() && !out.starts_with("Could not connect") && !out.is_empty() {
        Ok(out)
    } else {
        Err(out)
    }
}

/// Waits until `done`, [`LIMIT`] at most.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) -> Result<(), String> {
    let started = Instant::now();
    while !done() {
        if started.elapsed() > LIMIT {
            return Err(format!("waited {LIMIT:?} for {what}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
