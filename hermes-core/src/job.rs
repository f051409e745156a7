//! Typed jobs: a serde type that knows its message type.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::flow::Limits;
use crate::message::from_value;
use crate::{DEFAULT_PRIORITY, Error, Message, MessageBuilder, Priority, RetryPolicy};

/// A job as a Rust type: its fields are the message's payload object and [`TYPE`](Job::TYPE)
/// is the message type on the wire.
///
/// The bytes on the queue are Hermes' JSON, exactly as for a [`Message`] built by hand, so a PHP
/// worker handles a job a Rust process emitted, and a typed Rust handler handles a message of
/// that type a PHP process emitted.
///
/// ```
/// use std::time::Duration;
/// use hermes_core::{Job, RetryPolicy};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct SendEmail {
///     to: String,
/// }
///
/// impl Job for SendEmail {
///     const TYPE: &'static str = "send-email";
///     // Optional; these are the defaults but for the time limit.
///     const PRIORITY: hermes_core::Priority = hermes_core::DEFAULT_PRIORITY;
///     const TIME_LIMIT: Option<Duration> = Some(Duration::from_secs(30));
///     fn retry_policy() -> Option<RetryPolicy> {
///         None
///     }
/// }
///
/// let message = hermes_core::Message::from_job(&SendEmail { to: "a@b.c".into() })?;
/// assert_eq!(message.message_type(), "send-email");
/// assert_eq!(message.payload().unwrap()["to"], "a@b.c");
/// # Ok::<(), hermes_core::Error>(())
/// ```
pub trait Job: Serialize + DeserializeOwned + Send + 'static {
    /// The message type on the wire, which selects the handlers.
    const TYPE: &'static str;

    /// The priority [`Emitter::emit_job`](crate::Emitter::emit_job) sends at.
    /// Default [`DEFAULT_PRIORITY`].
    const PRIORITY: Priority = DEFAULT_PRIORITY;

    /// How long a handler of this job may run: past it, the handler's
    /// [`JobContext::cancellation_token`](crate::JobContext::cancellation_token) fires, its
    /// future is dropped after a short grace, and the run counts as failed (and is retried by
    /// [`retry_policy`](Job::retry_policy)). `None` (the default) leaves the dispatcher's
    /// [`DispatcherOptions::time_limit`](crate::DispatcherOptions::time_limit) in force.
    const TIME_LIMIT: Option<Duration> = None;

    /// How failed runs are tried again; `None` (the default, as for a Hermes handler without a
    /// retry policy) never retries.
    fn retry_policy() -> Option<RetryPolicy> {
        None
    }

    /// How many of these jobs may run at once and how often they may start, across every
    /// worker on the backend (see [`flow`](crate::flow)). The default limits nothing.
    /// Checked when the handler is registered (the dispatcher refuses to start with a limit
    /// [`Limits::check`] refuses) and at every emit.
    fn limits() -> Limits {
        Limits::new()
    }

    /// The key this job's per-key limits count it under (a tenant, a customer, a remote
    /// host), of 1 to [`MAX_LIMIT_KEY_LEN`](crate::flow::MAX_LIMIT_KEY_LEN) bytes; it travels
    /// with the message. The default is none: per-key limits do not count the job.
    fn limit_key(&self) -> Option<String> {
        None
    }
}

impl Message {
    /// A message of type `J::TYPE` whose payload is `job`, with a fresh id, created now.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] when `job` does not serialize to a JSON object or array (a
    /// unit struct, which serializes to `null`, gives a message without payload).
    pub fn from_job<J: Job>(job: &J) -> Result<Message, Error> {
        MessageBuilder::for_job(job).build()
    }

    /// The payload as the job `J`. A missing payload reads as `null`, or as `{}` when `J` does
    /// not take `null`, so a job whose fields are all optional takes a message without payload.
    ///
    /// The message type is not checked: the dispatcher only hands a handler of `J` messages
    /// of type `J::TYPE`.
    ///
    /// ```
    /// use hermes_core::{Job, Message};
    /// # #[derive(serde::Serialize, serde::Deserialize, Debug)]
    /// # struct SendEmail { to: String }
    /// # impl Job for SendEmail { const TYPE: &'static str = "send-email"; }
    ///
    /// let message = Message::builder("send-email")
    ///     .payload(&serde_json::json!({"to": 42}))
    ///     .build()?;
    /// let error = message.to_job::<SendEmail>().unwrap_err().to_string();
    /// assert!(error.contains("to: invalid type: integer `…`, expected a string"), "{error}");
    /// # Ok::<(), hermes_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidMessage`] when the payload does not fit `J`. The text names the field path
    /// and what was expected, never a payload value.
    pub fn to_job<J: Job>(&self) -> Result<J, Error> {
        let decoded = match self.payload() {
            Some(value) => from_value(value),
            None => from_value(&Value::Null)
                .or_else(|_| from_value(&Value::Object(serde_json::Map::new()))),
        };
        decoded.map_err(|reason| {
            Error::InvalidMessage(format!(
                "the payload of message #{} is not a {}: {reason}",
                self.id(),
                std::any::type_name::<J>()
            ))
        })
    }
}

impl MessageBuilder {
    /// A builder for a message of type `J::TYPE` with `job` as its payload, for setting the
    /// message's other fields.
    ///
    /// ```
    /// use hermes_core::{Job, MessageBuilder};
    /// # #[derive(serde::Serialize, serde::Deserialize)]
    /// # struct SendEmail { to: String }
    /// # impl Job for SendEmail { const TYPE: &'static str = "send-email"; }
    ///
    /// let message = MessageBuilder::for_job(&SendEmail { to: "a@b.c".into() })
    ///     .id("mail-1")
    ///     .retries(2)
    ///     .build()?;
    /// assert_eq!((message.id(), message.retries()), ("mail-1", 2));
    /// # Ok::<(), hermes_core::Error>(())
    /// ```
    pub fn for_job<J: Job>(job: &J) -> MessageBuilder {
        let mut builder = Message::builder(J::TYPE);
        if let Err(error) = J::limits().check() {
            builder.fail(format!("the limits of {}: {error}", J::TYPE));
        }
        if let Some(key) = job.limit_key() {
            builder = builder.limit_key(key);
        }
        match serde_json::to_value(job) {
            Ok(Value::Null) => builder,
            Ok(value) => builder.payload(&value),
            Err(e) => {
                builder.fail(format!("the payload cannot be serialized: {e}"));
                builder
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Mail {
        to: String,
        #[serde(default)]
        cc: Vec<String>,
    }
    impl Job for Mail {
        const TYPE: &'static str = "send-email";
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Ping;
    impl Job for Ping {
        const TYPE: &'static str = "ping";
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize, Default)]
    struct Optional {
        note: Option<String>,
    }
    impl Job for Optional {
        const TYPE: &'static str = "optional";
    }

    #[test]
    fn a_job_is_its_payload_and_comes_back_from_it() {
        let job = Mail {
            to: "a@b.c".into(),
            cc: vec![],
        };
        let message = Message::from_job(&job).unwrap();
        assert_eq!(message.message_type(), "send-email");
        assert_eq!(
            message.payload(),
            Some(&serde_json::json!({"to": "a@b.c", "cc": []}))
        );
        assert_eq!(message.to_job::<Mail>().unwrap(), job);
    }

    #[test]
    fn unit_and_all_optional_jobs_take_a_message_without_payload() {
        let message = Message::from_job(&Ping).unwrap();
        assert_eq!(message.payload(), None);
        assert_eq!(message.to_job::<Ping>().unwrap(), Ping);
        assert_eq!(
            Message::new("optional").to_job::<Optional>().unwrap(),
            Optional::default()
        );
    }

    #[test]
    fn a_scalar_job_is_refused() {
        #[derive(Serialize, Deserialize)]
        struct Count(u32);
        impl Job for Count {
            const TYPE: &'static str = "count";
        }
        let err = Message::from_job(&Count(3)).unwrap_err().to_string();
        assert!(err.contains("object or array"), "{err}");
    }

    #[test]
    fn a_payload_that_does_not_fit_names_the_id_the_type_and_the_field_only() {
        let message = Message::builder("send-email")
            .id("m-1")
            .payload(&serde_json::json!({"to": 42, "cc": ["secret@x.y"]}))
            .build()
            .unwrap();
        let err = message.to_job::<Mail>().unwrap_err().to_string();
        assert!(err.contains("#m-1"), "{err}");
        assert!(err.contains("Mail"), "{err}");
        assert!(err.contains("to: invalid type: integer `…`"), "{err}");
        assert!(!err.contains("42") && !err.contains("secret"), "{err}");
        let message = Message::builder("send-email")
            .payload(&serde_json::json!({"to": "x", "cc": [1]}))
            .build()
            .unwrap();
        let err = message.to_job::<Mail>().unwrap_err().to_string();
        assert!(err.contains("cc[0]: invalid type"), "{err}");
    }
}
