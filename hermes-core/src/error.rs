//! The one error type of the crate and of every driver.

use std::fmt;

use crate::Priority;

/// A boxed error from a client library, kept as the `source` of an [`Error`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in Hermes: in a driver, while encoding or decoding a message,
/// or in the dispatcher.
///
/// Drivers map their client library's errors into this enum. No variant carries credentials or
/// the raw bytes of a message.
///
/// [`Error::is_temporary`] tells errors worth retrying (a lost connection, a broker that is
/// restarting) from errors that will not go away by themselves.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A priority was used that no queue was set up for (`setup_priority_queue`).
    #[error("unknown priority {0}: no queue is set up for it")]
    UnknownPriority(Priority),

    /// A queue name is not allowed: names use letters, digits, `.`, `_` and `-`, and do not start
    /// with `.`.
    #[error("invalid queue name {name:?}: {reason}")]
    InvalidQueueName {
        /// The rejected name, printed escaped; a long one is cut (see [`excerpt`]).
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// A message could not be built or encoded (a payload that is not a JSON object or array,
    /// a time that is not finite, …).
    #[error("invalid message: {0}")]
    InvalidMessage(String),

    /// A message is larger than the driver accepts.
    #[error("message of {size} bytes is larger than the {max} bytes the {driver} driver accepts")]
    PayloadTooLarge {
        /// The driver's name.
        driver: &'static str,
        /// Size of the encoded message.
        size: usize,
        /// The driver's limit.
        max: usize,
    },

    /// Bytes could not be decoded into a message.
    #[error(transparent)]
    Decode(#[from] DecodeError),

    /// The driver received a message it could not decode and moved it to its quarantine
    /// (a failed folder, a dead-letter queue or key). The message is kept there, is never
    /// handed to a handler and is not delivered again.
    #[error("undecodable message moved to {quarantine}: {source}")]
    Undecodable {
        /// Where the driver keeps it (a path, a key or a queue name).
        quarantine: String,
        /// Why it could not be decoded.
        source: DecodeError,
    },

    /// A delivery was handed to a driver that did not produce it, or whose lease is gone.
    #[error("invalid delivery: {0}")]
    InvalidDelivery(String),

    /// The driver is misconfigured (a bad URL, an option out of range, a queue the broker
    /// refuses to declare as asked).
    #[error("{driver} driver configuration: {message}")]
    Config {
        /// The driver's name.
        driver: &'static str,
        /// What is wrong and how to fix it.
        message: String,
    },

    /// A configuration file ([`QueueConfig`](crate::QueueConfig)) could not be read or is
    /// wrong.
    #[error("configuration file {path}: {message}")]
    ConfigFile {
        /// The file.
        path: String,
        /// What is wrong, naming the line.
        message: String,
    },

    /// The connection to the broker failed or was lost. Always temporary.
    #[error("{driver} driver lost its connection: {source}")]
    Connection {
        /// The driver's name.
        driver: &'static str,
        /// The client library's error.
        source: BoxError,
    },

    /// Any other error reported by a driver or its client library.
    #[error("{driver} driver error: {message}")]
    Driver {
        /// The driver's name.
        driver: &'static str,
        /// What failed.
        message: String,
        /// Whether retrying the same operation later may succeed.
        temporary: bool,
        /// The underlying error, when there is one.
        #[source]
        source: Option<BoxError>,
    },

    /// An I/O error (the filesystem driver, a shutdown file).
    #[error("{context}: {source}")]
    Io {
        /// What was being done, and on which path.
        context: String,
        /// The operating system's error.
        source: std::io::Error,
    },

    /// A cron schedule, a time zone or a schedule entry that cannot be used.
    #[error("invalid schedule: {0}")]
    InvalidSchedule(String),

    /// A batch, chain or workflow cannot be built or changed as asked: a cycle, a step named
    /// twice or not at all, a batch that is finished and takes no more jobs.
    #[error("{0}")]
    Group(String),

    /// A job's result cannot be kept or read as asked: larger than the bound, not of the type
    /// asked for (the path in the result is named, never its values).
    #[error("{0}")]
    InvalidResult(String),

    /// A page cursor that is not one the backend gave
    /// ([`Page::next`](crate::inspect::Page::next)).
    #[error("invalid page cursor: not one this backend gave")]
    InvalidCursor,

    /// A driver was asked for something it cannot do.
    #[error("{driver} driver does not support {what}")]
    Unsupported {
        /// The driver's name.
        driver: &'static str,
        /// The operation.
        what: &'static str,
    },
}

impl Error {
    /// Whether retrying the same operation later may succeed without any change: a lost
    /// connection, a broker that is restarting, a timeout.
    ///
    /// The [`Dispatcher`](crate::Dispatcher) keeps retrying temporary errors with backoff for a
    /// while instead of exiting.
    pub fn is_temporary(&self) -> bool {
        match self {
            Error::Connection { .. } => true,
            Error::Driver { temporary, .. } => *temporary,
            Error::Io { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::Interrupted
                    | std::io::ErrorKind::WouldBlock
                    | std::io::ErrorKind::TimedOut
            ),
            _ => false,
        }
    }

    /// A temporary [`Error::Connection`] from a client library error.
    pub fn connection(driver: &'static str, source: impl Into<BoxError>) -> Self {
        Error::Connection {
            driver,
            source: source.into(),
        }
    }

    /// A client library's error: an [`Error::Connection`] when `temporary`, else an
    /// [`Error::Driver`] with the error's text.
    pub fn client(
        driver: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
        temporary: bool,
    ) -> Self {
        if temporary {
            Error::connection(driver, source)
        } else {
            Error::Driver {
                driver,
                message: source.to_string(),
                temporary: false,
                source: Some(Box::new(source)),
            }
        }
    }

    /// An [`Error::Driver`] without a source.
    pub fn driver(driver: &'static str, message: impl Into<String>, temporary: bool) -> Self {
        Error::Driver {
            driver,
            message: message.into(),
            temporary,
            source: None,
        }
    }

    /// An [`Error::Io`] naming what was done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// The longest input an error quotes whole; a longer one is cut by [`excerpt`].
pub const EXCERPT_LIMIT: usize = 64;

/// `text` as an error may quote it: whole when it has at most [`EXCERPT_LIMIT`] bytes, else its
/// start and its length (`"aaaa… (10000 bytes)"`), so a hostile input cannot make an error
/// (or a log line) of its size.
pub fn excerpt(text: &str) -> String {
    if text.len() <= EXCERPT_LIMIT {
        return text.to_owned();
    }
    let mut end = EXCERPT_LIMIT - 16;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// Bytes that could not be decoded into a [`Message`](crate::Message).
///
/// Its text gives the reason, the length of the input and the first 8 hex digits of the input's
/// SHA-256, so two reports can be matched to one input, but never the input itself: payloads can
/// hold personal data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    reason: String,
    len: usize,
    sha256_prefix: String,
}

impl DecodeError {
    /// A decode error for `input`, with a reason that must not quote the input.
    pub fn new(reason: impl Into<String>, input: &[u8]) -> Self {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(input);
        let sha256_prefix = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
        DecodeError {
            reason: reason.into(),
            len: input.len(),
            sha256_prefix,
        }
    }

    /// Why decoding failed.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The length of the input in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the input was empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first 8 hex digits of the SHA-256 of the input.
    pub fn sha256_prefix(&self) -> &str {
        &self.sha256_prefix
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot decode message: {} (length {}, sha256 {})",
            self.reason, self.len, self.sha256_prefix
        )
    }
}

impl std::error::Error for DecodeError {}
