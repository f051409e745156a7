//! Redis 6 ACL users: a user that may touch only the queue's keys and run only the commands
//! the guide lists runs the whole conformance suite, on both clients (`redis://user:password@`);
//! a wrong user or password is a permanent error that names neither.

mod common;

use std::process::Command;
use std::time::Duration;

use common::own_redis::{OwnRedis, PASSWORD, free_port};
use hermes_core::{Error, async_trait};
use hermes_redis::RedisSetDriver;
use hermes_testkit::suite::Harness;

/// The user the driver connects as, and its password.
const USER: &str = "jobs-app";
const USER_PASSWORD: &str = "app-s3cret";

/// What the user may do, as the Redis chapter of the guide lists it, with the keys of the test
/// queues (`t-*`) where an application grants its own prefix (`~hermes*`).
pub const RULES: &[&str] = &[
    "on",
    ">app-s3cret",
    "resetkeys",
    "~t-*",
    "resetchannels",
    "&__keyspace@0__:t-*",
    "-@all",
    // Connecting (the clients' handshakes).
    "+ping",
    "+select",
    "+client|id",
    // Scripts, and what they run.
    "+evalsha",
    "+script|load",
    "+time",
    "+sadd",
    "+srem",
    "+spop",
    "+scard",
    "+sscan",
    "+smembers",
    "+zadd",
    "+zrem",
    "+zrange",
    "+zrangebyscore",
    "+zscore",
    "+zcount",
    "+zcard",
    "+zremrangebyscore",
    "+hset",
    "+hget",
    "+hdel",
    "+hexists",
    "+hgetall",
    "+hmget",
    "+hsetnx",
    "+hincrby",
    "+get",
    "+set",
    "+del",
    "+exists",
    "+pexpire",
    "+pttl",
    "+llen",
    "+rpush",
    // Waiting for wake-ups.
    "+blpop",
];

/// A Redis of the test's own with the user [`USER`] under [`RULES`], and the client library
/// the drivers use.
pub struct AclHarness {
    server: OwnRedis,
    client: &'static str,
}

impl AclHarness {
    /// A server of its own with the user, for drivers on `client` (`redis` or `fred`).
    pub fn new(client: &'static str) -> AclHarness {
        let server = OwnRedis::start_with(free_port(), &[]);
        let status = Command::new("redis-cli")
            .args([
                "-p",
                &server.port.to_string(),
                "-a",
                PASSWORD,
                "--no-auth-warning",
            ])
            .args(["ACL", "SETUSER", USER])
            .args(RULES)
            .output()
            .expect("redis-cli is installed with redis-server");
        let said = String::from_utf8_lossy(&status.stdout);
        assert!(said.trim() == "OK", "ACL SETUSER: {said}");
        AclHarness { server, client }
    }

    fn url(&self, user: &str, password: &str, queue: &str) -> String {
        format!(
            "redis://{user}:{password}@127.0.0.1:{}/0?key={queue}&schedule_key={queue}_schedule\
             &client={}&refresh_interval=0.02&visibility_timeout=1",
            self.server.port, self.client
        )
    }

    /// A command as the server's administrator, outside the user's rules.
    async fn admin<T: redis::FromRedisValue>(&self, args: &[&[u8]]) -> T {
        let client = redis::Client::open(self.server.url(PASSWORD)).unwrap();
        let mut connection = client.get_multiplexed_async_connection().await.unwrap();
        let mut command = redis::cmd(std::str::from_utf8(args[0]).unwrap());
        for arg in &args[1..] {
            command.arg(*arg);
        }
        command.query_async(&mut connection).await.unwrap()
    }
}

#[async_trait]
impl Harness for AclHarness {
    type Driver = RedisSetDriver;

    async fn open(&self, queue: &str) -> Result<RedisSetDriver, Error> {
        RedisSetDriver::from_url(&self.url(USER, USER_PASSWORD, queue)).await
    }

    async fn push_raw(&self, queue: &str, bytes: &[u8]) -> Result<(), Error> {
        self.admin::<i64>(&[b"SADD", queue.as_bytes(), bytes]).await;
        Ok(())
    }

    async fn pull_raw(&self, queue: &str) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.admin(&[b"SPOP", queue.as_bytes()]).await)
    }

    async fn quarantined(&self, queue: &str) -> Result<usize, Error> {
        let key = format!("{queue}_dead_letters");
        let ids: Vec<String> = self.admin(&[b"HKEYS", key.as_bytes()]).await;
        Ok(common::undecodable(&ids))
    }

    fn visibility_timeout(&self) -> Duration {
        Duration::from_secs(1)
    }
}

mod redis_rs {
    hermes_testkit::conformance_suite!(super::AclHarness::new("redis"));
}

mod fred {
    hermes_testkit::conformance_suite!(super::AclHarness::new("fred"));
}

/// A wrong user or password: a permanent error that names neither, on both clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_user_or_password_is_permanent_and_named_nowhere() {
    for client in ["redis", "fred"] {
        let harness = AclHarness::new(client);
        for (user, password) in [("no-such-user", USER_PASSWORD), (USER, "wrong-s3cret")] {
            let err = RedisSetDriver::from_url(&harness.url(user, password, "t-refused"))
                .await
                .unwrap_err();
            let text = format!("{err} {err:?}");
            assert!(!err.is_temporary(), "{client}: retried as lost: {text}");
            assert!(matches!(err, Error::Config { .. }), "{client}: {text}");
            for secret in [user, password, USER_PASSWORD] {
                assert!(!text.contains(secret), "{client}: {text}");
            }
        }
    }
}
