//! The broker nodes a driver connects to: the URL it was made with, then any others of the same
//! cluster, tried in turn.

use std::sync::atomic::{AtomicUsize, Ordering};

use hermes_core::Error;
use hermes_core::driver::{CALL_TIMEOUT, bounded};

use super::Session;
use crate::{NAME, RabbitMqOptions};

/// The URLs of the nodes, and which one to try first: the last that answered.
pub(crate) struct Nodes {
    urls: Vec<String>,
    first: AtomicUsize,
}

impl std::fmt::Debug for Nodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: Vec<String> = self.urls.iter().map(|url| redact_url(url)).collect();
        match shown.as_slice() {
            [one] => one.fmt(f),
            all => f.debug_list().entries(all).finish(),
        }
    }
}

impl Nodes {
    /// The node at `url` alone.
    pub(crate) fn new(url: &str) -> Self {
        Nodes {
            urls: vec![url.to_owned()],
            first: AtomicUsize::new(0),
        }
    }

    /// These nodes, then the nodes at `more` (none: the same nodes), tried from the first.
    pub(crate) fn and(&self, more: impl IntoIterator<Item = String>) -> Self {
        let mut urls = self.urls.clone();
        urls.extend(more);
        Nodes {
            urls,
            first: AtomicUsize::new(0),
        }
    }

    /// A session on the first node that takes the connection, starting with the one that
    /// answered last. A node that cannot be reached, or does not answer within
    /// [`CALL_TIMEOUT`], passes the turn to the next; a refusal
    /// (a wrong password, say) is returned at once, as every node would refuse alike. When
    /// none answers, the error of the last one tried.
    pub(crate) async fn connect(&self, options: &RabbitMqOptions) -> Result<Session, Error> {
        let start = self.first.load(Ordering::Relaxed);
        let mut last = None;
        for turn in 0..self.urls.len() {
            let index = (start + turn) % self.urls.len();
            let open = Session::open(
                &self.urls[index],
                options.durable,
                options.queue_type,
                options.prefetch,
            );
            match bounded(NAME, "connecting", CALL_TIMEOUT, open).await {
                Ok(session) => {
                    self.first.store(index, Ordering::Relaxed);
                    return Ok(session);
                }
                Err(e) if e.is_temporary() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::Connection {
            driver: NAME,
            source: "no broker URL to connect to".into(),
        }))
    }
}

/// `url` with the password of its user information replaced by `***`.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // The last '@' ends the user information, even when the password holds '/' or '@'.
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
    let hidden = if userinfo.contains(':') { ":***" } else { "" };
    format!("{scheme}://{user}{hidden}@{host}")
}

/// `url` with its host and port replaced by `host_port` (`node2:5672`), keeping the scheme, the
/// user information and the virtual host.
pub(crate) fn at_host(url: &str, host_port: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (userinfo, location) = match rest.rsplit_once('@') {
        Some((userinfo, location)) => (Some(userinfo), location),
        None => (None, rest),
    };
    let path = location.find('/').map_or("", |at| &location[at..]);
    match userinfo {
        Some(userinfo) => format!("{scheme}://{userinfo}@{host_port}{path}"),
        None => format!("{scheme}://{host_port}{path}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_password() {
        for (url, shown) in [
            (
                "amqp://guest:s3cret@127.0.0.1:5672/%2f",
                "amqp://guest:***@127.0.0.1:5672/%2f",
            ),
            ("amqps://u:p@a@host", "amqps://u:***@host"),
            ("amqp://u:pa/ss?x#y@host/vh", "amqp://u:***@host/vh"),
            ("amqp://user@host/vh", "amqp://user@host/vh"),
            ("amqp://host:5672", "amqp://host:5672"),
            ("not a url", "not a url"),
        ] {
            assert_eq!(redact_url(url), shown);
        }
    }

    #[test]
    fn another_host_keeps_the_credentials_and_the_virtual_host() {
        assert_eq!(
            at_host("amqp://u:p@w@a:5672/%2f", "b:5673"),
            "amqp://u:p@w@b:5673/%2f"
        );
        assert_eq!(at_host("amqps://a/jobs", "b"), "amqps://b/jobs");
        assert_eq!(at_host("amqp://a:1", "b:2"), "amqp://b:2");
    }

    #[test]
    fn debug_hides_every_password() {
        let nodes = Nodes::new("amqp://u:secret-1@a/%2f").and(["amqp://u:secret-2@b/%2f".into()]);
        let shown = format!("{nodes:?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(
            shown.contains("u:***@a") && shown.contains("u:***@b"),
            "{shown}"
        );
    }
}
