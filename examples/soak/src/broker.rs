//! The broker of a run: choosing where the queue lives, restarting the broker, and removing
//! the run's queues at the end.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::args::{DriverKind, RunArgs};
use crate::sentinel::SentinelServers;
use crate::target::{Target, sqs_client};

const DEFAULT_AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
const DEFAULT_SQS_ENDPOINT: &str = "http://127.0.0.1:4566";
const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// How long a restarted broker stays down.
pub const DOWN_FOR: Duration = Duration::from_secs(1);

/// The broker of a run.
#[derive(Debug)]
pub struct Broker {
    kind: DriverKind,
    own_server: Option<OwnServer>,
    /// With `--sentinel`: the servers and sentinels the run started; a restart is a failover.
    sentinel: Option<SentinelServers>,
}

impl Broker {
    /// Where the run's queue `queue` lives: in `folder` for the filesystem; on a Redis server
    /// of the run's own unless a URL is given; on the given or local RabbitMQ or SQS server.
    ///
    /// # Errors
    /// A setting that cannot be used: restarts of a broker the run cannot restart.
    pub fn prepare(args: &RunArgs, folder: &Path, queue: &str) -> Result<(Broker, Target), String> {
        let kind = args.driver.expect("required by the command line");
        let restarts = args.broker_restart_every.is_some();
        let mut own_server = None;
        let mut sentinel = None;
        let endpoint = match kind {
            DriverKind::Fs | DriverKind::Memory => {
                if restarts {
                    return Err(format!(
                        "--broker-restart-every: the {} driver has no broker to restart",
                        kind.name()
                    ));
                }
                folder.join("queues").display().to_string()
            }
            DriverKind::Redis | DriverKind::RedisFred if args.sentinel => {
                if args.url.is_some() {
                    return Err("--sentinel starts servers and sentinels of the run's own: \
                                leave out --url"
                        .to_owned());
                }
                let group = SentinelServers::start(&folder.join("sentinel"))?;
                let url = group.url();
                sentinel = Some(group);
                url
            }
            _ if args.sentinel => {
                return Err(format!(
                    "--sentinel is for the Redis drivers, not {}",
                    kind.name()
                ));
            }
            DriverKind::Redis | DriverKind::RedisFred => match &args.url {
                Some(_) if restarts => {
                    return Err(
                        "--broker-restart-every restarts only the Redis server the run \
                                starts itself (with AOF and appendfsync always): leave out --url"
                            .to_owned(),
                    );
                }
                Some(url) => url.clone(),
                None => {
                    let server =
                        OwnServer::start(ServerKind::Redis, &folder.join("redis"), Vec::new())?;
                    let url = server.url();
                    own_server = Some(server);
                    url
                }
            },
            DriverKind::Rabbitmq => {
                let url = args
                    .url
                    .clone()
                    .unwrap_or_else(|| DEFAULT_AMQP_URL.to_owned());
                if restarts && !is_loopback(&url) {
                    return Err(
                        "--broker-restart-every restarts a RabbitMQ on this machine \
                                only (rabbitmqctl): give a loopback URL"
                            .to_owned(),
                    );
                }
                url
            }
            DriverKind::Postgres => match &args.url {
                Some(_) if restarts => {
                    return Err(
                        "--broker-restart-every restarts only the PostgreSQL cluster the run \
                         starts itself: leave out --url"
                            .to_owned(),
                    );
                }
                Some(url) => url.clone(),
                None if restarts => {
                    let server = OwnServer::start(
                        ServerKind::Postgres,
                        &folder.join("postgres"),
                        Vec::new(),
                    )?;
                    let url = server.url();
                    own_server = Some(server);
                    url
                }
                None => DEFAULT_POSTGRES_URL.to_owned(),
            },
            DriverKind::Sqs => {
                if restarts {
                    return Err("--broker-restart-every: an SQS server cannot be restarted \
                                (the local test server keeps nothing across a restart)"
                        .to_owned());
                }
                args.url
                    .clone()
                    .unwrap_or_else(|| DEFAULT_SQS_ENDPOINT.to_owned())
            }
        };
        let target = Target {
            kind,
            endpoint,
            queue: queue.to_owned(),
            visibility: args.visibility,
            store: None,
        };
        Ok((
            Broker {
                kind,
                own_server,
                sentinel,
            },
            target,
        ))
    }

    /// Where the queue `queue` of an outage run lives: on a Redis or SQS test server the run
    /// starts itself, or on the local RabbitMQ.
    ///
    /// # Errors
    /// For a backend without a broker to stop, or a server that cannot be started.
    pub fn for_outage(
        kind: DriverKind,
        folder: &Path,
        queue: &str,
        visibility: Duration,
    ) -> Result<(Broker, Target), String> {
        let own_server = match kind {
            DriverKind::Redis | DriverKind::RedisFred => Some(OwnServer::start(
                ServerKind::Redis,
                &folder.join("redis"),
                Vec::new(),
            )?),
            DriverKind::Sqs => Some(OwnServer::start(
                ServerKind::Moto,
                &folder.join("moto"),
                Vec::new(),
            )?),
            DriverKind::Postgres => Some(OwnServer::start(
                ServerKind::Postgres,
                &folder.join("postgres"),
                Vec::new(),
            )?),
            DriverKind::Rabbitmq => None,
            DriverKind::Fs | DriverKind::Memory => {
                return Err(format!("the {} driver has no broker to stop", kind.name()));
            }
        };
        let endpoint = own_server
            .as_ref()
            .map_or_else(|| DEFAULT_AMQP_URL.to_owned(), OwnServer::url);
        let target = Target {
            kind,
            endpoint,
            queue: queue.to_owned(),
            visibility,
            store: None,
        };
        Ok((
            Broker {
                kind,
                own_server,
                sentinel: None,
            },
            target,
        ))
    }

    /// Stops the broker: `rabbitmqctl stop_app`, or kills the run's own server.
    ///
    /// # Errors
    /// When there is no broker to stop, or it cannot be stopped.
    pub fn stop(&mut self) -> Result<(), String> {
        match (self.kind, &mut self.own_server) {
            (DriverKind::Rabbitmq, _) => rabbitmqctl("stop_app"),
            (_, Some(server)) => {
                server.stop();
                Ok(())
            }
            _ => Err(format!(
                "the {} driver has no broker to stop",
                self.kind.name()
            )),
        }
    }

    /// Starts the broker [`Broker::stop`] stopped, and waits until it answers.
    ///
    /// # Errors
    /// When it cannot be started.
    pub fn start(&mut self) -> Result<(), String> {
        match (self.kind, &mut self.own_server) {
            (DriverKind::Rabbitmq, _) => {
                rabbitmqctl("start_app")?;
                rabbitmqctl("await_startup")
            }
            (_, Some(server)) => server.launch(),
            _ => Err(format!(
                "the {} driver has no broker to start",
                self.kind.name()
            )),
        }
    }

    /// Stops the broker, keeps it down for [`DOWN_FOR`], starts it again and waits until it
    /// answers; with `--sentinel`, fails over (see [`SentinelServers::fail_over`]).
    ///
    /// # Errors
    /// When it cannot be stopped or started.
    pub fn restart(&mut self) -> Result<(), String> {
        if let Some(sentinel) = &mut self.sentinel {
            return sentinel.fail_over();
        }
        self.stop()?;
        std::thread::sleep(DOWN_FOR);
        self.start()
    }

    /// Removes what the run left on the broker (queues, keys); best effort.
    pub async fn clean_up(&mut self, target: &Target) {
        match self.kind {
            DriverKind::Redis | DriverKind::RedisFred
                if self.own_server.is_none() && self.sentinel.is_none() =>
            {
                delete_redis_keys(&target.endpoint, &target.queue);
            }
            DriverKind::Rabbitmq => delete_rabbitmq_queues(target).await,
            DriverKind::Sqs if self.own_server.is_none() => delete_sqs_queues(target).await,
            _ => {}
        }
        self.own_server = None;
        self.sentinel = None;
    }
}

/// A loopback port no one listens on now.
///
/// # Errors
/// When none can be had.
pub fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

fn is_loopback(url: &str) -> bool {
    let host = url
        .split("://")
        .nth(1)
        .unwrap_or(url)
        .rsplit('@')
        .next()
        .unwrap_or_default();
    ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .any(|h| host.starts_with(h))
}

fn rabbitmqctl(command: &str) -> Result<(), String> {
    let output = Command::new("rabbitmqctl")
        .args(["-q", command])
        .output()
        .map_err(|e| format!("cannot run rabbitmqctl {command}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "rabbitmqctl {command} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// Deletes the keys starting with `prefix` on the Redis server at `url`; best effort.
pub(crate) fn delete_redis_keys(url: &str, prefix: &str) {
    let keys = Command::new("redis-cli")
        .args(["-u", url, "--scan", "--pattern", &format!("{prefix}*")])
        .output();
    if let Ok(keys) = keys {
        let keys = String::from_utf8_lossy(&keys.stdout);
        let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
        if !keys.is_empty() {
            let _ = Command::new("redis-cli")
                .args(["-u", url, "DEL"])
                .args(keys)
                .stdout(Stdio::null())
                .status();
        }
    }
}

async fn delete_rabbitmq_queues(target: &Target) {
    use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
    let Ok(connection) =
        lapin::Connection::connect(&target.endpoint, lapin::ConnectionProperties::default()).await
    else {
        return;
    };
    let Ok(channel) = connection.create_channel().await else {
        return;
    };
    for queue in [target.queue.clone(), target.high_queue()] {
        for name in hermes_rabbitmq::queues_of(&queue) {
            let _ = channel
                .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
                .await;
        }
        for name in hermes_rabbitmq::exchanges_of(&queue) {
            let _ = channel
                .exchange_delete(name.as_str().into(), ExchangeDeleteOptions::default())
                .await;
        }
    }
    let _ = connection.close(200, "done".into()).await;
}

/// Creates the run's queues again, as SQS keeps them: the test server the run restarted
/// forgot them.
pub async fn recreate_sqs_queues(target: &Target) -> Result<(), String> {
    let client = sqs_client(&target.endpoint).await;
    for name in [target.queue.clone(), target.high_queue()] {
        client
            .create_queue()
            .queue_name(&name)
            .send()
            .await
            .map_err(|e| format!("cannot create the queue {name}: {e}"))?;
    }
    Ok(())
}

async fn delete_sqs_queues(target: &Target) {
    let client = sqs_client(&target.endpoint).await;
    let Ok(listed) = client
        .list_queues()
        .queue_name_prefix(&target.queue)
        .send()
        .await
    else {
        return;
    };
    for url in listed.queue_urls() {
        let _ = client.delete_queue().queue_url(url).send().await;
    }
}

/// A server the run starts itself on a free loopback port, and stops when dropped: Redis
/// appending every write to its AOF and syncing it before replying (`appendfsync always`), so
/// a restart loses nothing it confirmed; a PostgreSQL cluster (`initdb`, then `pg_ctl`, as
/// the `postgres` user when run as root), stopped with `pg_ctl stop -m immediate`, a crash
/// its write-ahead log recovers from; or an SQS test server (moto).
#[derive(Debug)]
pub struct OwnServer {
    kind: ServerKind,
    folder: PathBuf,
    port: u16,
    /// More settings of a Redis (`--name value` pairs).
    settings: Vec<String>,
    process: Option<Child>,
}

/// The servers a run can start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// `redis-server`.
    Redis,
    /// moto, run by the Python of `HERMES_MOTO_PYTHON` (default: the virtualenv the test
    /// command installs it into).
    Moto,
    /// PostgreSQL, from the newest version under `/usr/lib/postgresql`.
    Postgres,
}

impl OwnServer {
    /// Starts one, keeping its files in `folder`, with more `settings` for a Redis.
    ///
    /// # Errors
    /// When the server cannot be run or does not answer.
    pub fn start(kind: ServerKind, folder: &Path, settings: Vec<String>) -> Result<Self, String> {
        std::fs::create_dir_all(folder).map_err(|e| format!("cannot create {folder:?}: {e}"))?;
        let mut server = OwnServer {
            kind,
            folder: folder.to_path_buf(),
            port: free_port()?,
            settings,
            process: None,
        };
        server.launch()?;
        Ok(server)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its URL.
    pub fn url(&self) -> String {
        match self.kind {
            ServerKind::Redis => format!("redis://127.0.0.1:{}", self.port),
            ServerKind::Moto => format!("http://127.0.0.1:{}", self.port),
            ServerKind::Postgres => format!("postgres://postgres@127.0.0.1:{}/postgres", self.port),
        }
    }

    fn command(&self) -> Command {
        let port = self.port.to_string();
        match self.kind {
            ServerKind::Redis => {
                let mut command = Command::new("redis-server");
                command
                    .args(["--port", &port, "--bind", "127.0.0.1"])
                    .arg("--dir")
                    .arg(&self.folder)
                    .args([
                        "--appendonly",
                        "yes",
                        "--appendfsync",
                        "always",
                        "--save",
                        "",
                    ])
                    .args(["--logfile", "redis.log", "--daemonize", "no"])
                    .args(&self.settings);
                command
            }
            ServerKind::Postgres => unreachable!("started by pg_ctl"),
            ServerKind::Moto => {
                let python = std::env::var("HERMES_MOTO_PYTHON")
                    .unwrap_or_else(|_| "/var/tmp/hermes-moto-venv/bin/python".to_owned());
                let mut command = Command::new(python);
                command
                    .arg("-c")
                    .arg("import sys; from moto.server import main; sys.exit(main())")
                    .args(["-H", "127.0.0.1", "-p", &port]);
                command
            }
        }
    }

    /// Starts the server again after [`OwnServer::stop`], on the same port and files, and
    /// waits until it answers.
    ///
    /// # Errors
    /// When it does not come back.
    pub fn launch(&mut self) -> Result<(), String> {
        if self.kind == ServerKind::Postgres {
            return self.pg_start();
        }
        let child = self
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {:?} (is it installed?): {e}", self.kind))?;
        self.process = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.answers() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "{:?} on port {} did not answer",
            self.kind, self.port
        ))
    }

    fn answers(&self) -> bool {
        use std::io::{Read as _, Write as _};
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        if self.kind == ServerKind::Moto {
            return true;
        }
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut reply = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }

    /// Kills the server (SIGKILL: whatever Redis confirmed is in its AOF; PostgreSQL stops
    /// at once, and recovers from its write-ahead log when started).
    pub fn stop(&mut self) {
        if self.kind == ServerKind::Postgres {
            let data = self.folder.join("data");
            let _ = pg_command("pg_ctl")
                .arg("-D")
                .arg(&data)
                .args(["-m", "immediate", "stop"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            return;
        }
        if let Some(mut child) = self.process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl OwnServer {
    /// Makes the cluster on the first start, then starts it with `pg_ctl` and waits until it
    /// accepts connections.
    fn pg_start(&mut self) -> Result<(), String> {
        let data = self.folder.join("data");
        if !data.exists() {
            if is_root() {
                let status = Command::new("chown")
                    .arg("postgres")
                    .arg(&self.folder)
                    .status()
                    .map_err(|e| format!("cannot run chown: {e}"))?;
                if !status.success() {
                    return Err(format!(
                        "cannot give {:?} to the postgres user",
                        self.folder
                    ));
                }
            }
            run(pg_command("initdb")
                .arg("-D")
                .arg(&data)
                .args(["-A", "trust", "-U", "postgres"]))?;
        }
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=on",
            self.port,
            self.folder.display()
        );
        run(pg_command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(self.folder.join("log"))
            .args(["-w", "-t", "60", "-o", &options, "start"]))
    }
}

/// A PostgreSQL program of the newest version installed, run as the `postgres` user when this
/// process is root (PostgreSQL refuses to run as root).
fn pg_command(program: &str) -> Command {
    let bin = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .filter(|bin| bin.join(program).exists())
        .max_by_key(|bin| {
            bin.parent()
                .and_then(|v| v.file_name())
                .and_then(|v| v.to_str())
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(0)
        })
        .map_or_else(|| PathBuf::from(program), |bin| bin.join(program));
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(bin);
        command
    } else {
        Command::new(bin)
    }
}

/// Whether this process runs as root (it owns `/proc/self`).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Runs `command` to its end, quietly; an error when it fails.
fn run(command: &mut Command) -> Result<(), String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        self.stop();
    }
}
