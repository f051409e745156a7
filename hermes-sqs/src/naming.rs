//! SQS queue names: what SQS accepts, the names of the dead-letter queue (the quarantine) and
//! the delay queue, and the message attribute naming where a delayed message goes.

use hermes_core::Error;
use hermes_core::driver::validate_queue_name;

/// What the default queue's name gets for the dead-letter queue (the quarantine).
pub const QUARANTINE_SUFFIX: &str = "-quarantine";

/// What the queue of long delays adds to the default queue's name.
pub const DELAY_SUFFIX: &str = "-delay";

/// The queue where messages due later than SQS can delay wait, for the driver whose default
/// queue is `queue`. Only Hermes for Rust reads it: it sends each message on to its queue
/// once no more than [`max_delay`](crate::SqsOptions::max_delay) is left.
pub fn delay_queue(queue: &str) -> String {
    format!("{queue}{DELAY_SUFFIX}")
}

/// The message attribute naming the queue a message in the delay queue goes to.
pub(crate) const TARGET_ATTRIBUTE: &str = "HermesTarget";

/// The longest SQS queue name.
pub const MAX_QUEUE_NAME_LEN: usize = 80;

/// The dead-letter queue of the driver whose default queue is `queue`: the messages whose
/// handler failed for good and the undecodable ones, of all its priority queues.
pub fn quarantine_queue(queue: &str) -> String {
    format!("{queue}{QUARANTINE_SUFFIX}")
}

/// Checks a queue name against Hermes' rules and SQS's: letters, digits, `-` and `_`, at most
/// `max_len` characters.
pub(crate) fn validate_sqs_queue_name(name: &str, max_len: usize) -> Result<(), Error> {
    validate_queue_name(name)?;
    let reason = if name.contains('.') {
        Some(
            "an SQS queue name may contain only letters, digits, '-' and '_' (FIFO queues, \
             named '.fifo', are not supported)",
        )
    } else if name.len() > MAX_QUEUE_NAME_LEN {
        Some("an SQS queue name must not be longer than 80 characters")
    } else if name.len() > max_len {
        Some(
            "the default queue's name must not be longer than 69 characters, so that the name \
             of its quarantine, '<name>-quarantine', fits SQS's 80",
        )
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidQueueName {
            name: hermes_core::driver::excerpt(name),
            reason,
        }),
        None => Ok(()),
    }
}

/// The longest name of a default queue: its quarantine's name must fit too.
pub(crate) const MAX_DEFAULT_QUEUE_NAME_LEN: usize = MAX_QUEUE_NAME_LEN - QUARANTINE_SUFFIX.len();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(MAX_DEFAULT_QUEUE_NAME_LEN, 69);
        for ok in ["hermes", "a_b-C9", &"x".repeat(69)] {
            validate_sqs_queue_name(ok, MAX_DEFAULT_QUEUE_NAME_LEN).unwrap();
        }
        validate_sqs_queue_name(&"x".repeat(80), MAX_QUEUE_NAME_LEN).unwrap();
        for bad in ["", "a.fifo", "a b", "é", &"x".repeat(70)] {
            let err = validate_sqs_queue_name(bad, MAX_DEFAULT_QUEUE_NAME_LEN).unwrap_err();
            assert!(matches!(err, Error::InvalidQueueName { .. }), "{bad:?}");
        }
        assert!(validate_sqs_queue_name(&"x".repeat(81), MAX_QUEUE_NAME_LEN).is_err());
        assert_eq!(quarantine_queue("jobs"), "jobs-quarantine");
    }
}
