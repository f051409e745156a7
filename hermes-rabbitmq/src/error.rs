//! How broker errors become Hermes errors.

use hermes_core::Error;
use lapin::ErrorKind;

use crate::NAME;

/// A lapin error as a Hermes error, by the broker's AMQP reply code: refused credentials or
/// permissions (ACCESS_REFUSED), a missing entity (NOT_FOUND), a declaration that does not
/// match what exists (PRECONDITION_FAILED) and a forbidden operation (NOT_ALLOWED) do not go
/// away by retrying, so they are configuration errors saying the way out; anything else (a
/// dropped connection, a broker shutting down) is a temporary connection error.
pub(crate) fn lapin_error(error: lapin::Error) -> Error {
    let ErrorKind::ProtocolError(amqp) = error.kind() else {
        return Error::connection(NAME, error);
    };
    // An AMQP short string: at most 255 bytes.
    let reply = amqp.get_message().as_str();
    let message = match amqp.get_id() {
        403 => format!(
            "the broker refused access ({reply}): check the user name, the password and the \
             user's permissions on the virtual host"
        ),
        404 => format!("the broker has no such entity ({reply})"),
        406 if reply.contains("durable") => format!(
            "the broker refused a queue declaration ({reply}): the queue exists with another \
             durability. Hermes 5 and older, and PHP Hermes' current master, declare it \
             non-durable: to share such a queue, set `durable: false` in RabbitMqOptions"
        ),
        406 if reply.contains("x-queue-type") => format!(
            "the broker refused a queue declaration ({reply}): the queue exists as another \
             type. Set `queue_type` in RabbitMqOptions to the type it has (a PHP Hermes \
             process declares classic queues), or move its messages to a new queue"
        ),
        406 => format!(
            "the broker refused a declaration ({reply}); an existing queue or exchange with \
             other settings (durable or not, arguments) must be deleted or used with \
             matching options"
        ),
        530 => format!("the broker does not allow this ({reply})"),
        _ => return Error::connection(NAME, error),
    };
    Error::Config {
        driver: NAME,
        message,
    }
}

/// The broker's AMQP reply code in `error` (404 NOT_FOUND, 406 PRECONDITION_FAILED, …), when it
/// is a refusal of the broker's.
pub(crate) fn reply_code(error: &lapin::Error) -> Option<u16> {
    match error.kind() {
        ErrorKind::ProtocolError(amqp) => Some(amqp.get_id()),
        _ => None,
    }
}
