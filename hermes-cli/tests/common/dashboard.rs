//! A running `hermes dashboard` for the dashboard's tests: started on a queue's URL, asked
//! over plain HTTP, stopped as Ctrl-C would; and a dead letter to show on it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hermes_core::inspect::{DeadKind, DeadReason};
use hermes_core::{DEFAULT_PRIORITY, Driver, Message};

/// A running dashboard: the child process and the address it printed.
pub struct Dashboard {
    child: Child,
    /// Where it is reached: `127.0.0.1:<port>`.
    pub address: String,
    /// The `Authorization` header every request sends.
    pub authorization: Option<String>,
}

impl Dashboard {
    /// A dashboard on loopback, with `extra` arguments.
    pub fn start(url: &str, extra: &[&str]) -> Dashboard {
        Dashboard::start_with(url, "127.0.0.1:0", extra, &[])
    }

    /// A dashboard listening on `listen` (reached on loopback), with `extra` arguments and
    /// the environment variables `env`.
    pub fn start_with(url: &str, listen: &str, extra: &[&str], env: &[(&str, &str)]) -> Dashboard {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hermes"))
            .args(["--url", url, "dashboard", "--listen", listen])
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .spawn()
            .expect("running hermes dashboard");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let address = line
            .trim()
            .strip_prefix("hermes dashboard on http://")
            .and_then(|a| a.strip_suffix('/'))
            .unwrap_or_else(|| panic!("the first line names the address: {line:?}"))
            .replace("0.0.0.0:", "127.0.0.1:");
        Dashboard {
            child,
            address,
            authorization: None,
        }
    }

    /// The status and body of a request.
    pub fn request(&self, method: &str, path: &str, form: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let authorization = self
            .authorization
            .as_ref()
            .map_or_else(String::new, |value| format!("Authorization: {value}\r\n"));
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{authorization}\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
            self.address,
            form.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = response
            .split_once("\r\n\r\n")
            .map_or(String::new(), |(_, b)| b.to_owned());
        (status, body)
    }

    pub fn get(&self, path: &str) -> String {
        let (status, body) = self.request("GET", path, "");
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// Stops it as Ctrl-C would; it must exit 0.
    pub fn stop(mut self) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-INT", &pid])
                .status()
                .unwrap()
                .success()
        );
        assert_eq!(self.child.wait().unwrap().code(), Some(0));
    }
}

impl Drop for Dashboard {
    /// A test that failed half-way leaves no server behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The token in the first form of `page`.
pub fn token(page: &str) -> String {
    let at = page
        .find("name=\"token\" value=\"")
        .expect("a form with a token")
        + 20;
    page[at..at + 32].to_owned()
}

pub async fn bury(driver: &dyn Driver, id: &str, error: &str) {
    let message = Message::builder("charge")
        .id(id)
        .retries(2)
        .build()
        .unwrap();
    driver.send(&message, DEFAULT_PRIORITY).await.unwrap();
    let delivery = driver
        .receive(&[], Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    let reason = DeadReason::new(DeadKind::Failed, error).with_handler("Billing");
    driver
        .dead_letters()
        .unwrap()
        .add(&delivery, &reason)
        .await
        .unwrap();
}
