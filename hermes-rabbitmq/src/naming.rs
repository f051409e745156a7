//! The names of the queues and exchanges the driver declares for a queue, the queue names
//! RabbitMQ accepts, and the headers of a dead letter (see `dead_letters`).

use hermes_core::Error;
use hermes_core::driver::validate_queue_name;

use crate::ladder::DELAY_LEVELS;

/// The TTLs in milliseconds of the delay queues `<queue>.delay.<ms>` of earlier versions, which
/// dead-letter straight into the queue: messages still in them arrive early and are delayed
/// again by the consumer. New delays go through the ladder (see [`delay_level`]).
pub const LEGACY_DELAY_LEVELS_MS: [u64; 12] = [
    10, 40, 160, 640, 2_560, 10_240, 40_960, 163_840, 655_360, 2_621_440, 10_485_760, 41_943_040,
];

/// Checks a queue name for RabbitMQ: Hermes' rules, and not `amq.`, which the broker keeps for
/// itself.
pub(crate) fn validate_rabbitmq_queue_name(name: &str) -> Result<(), Error> {
    validate_queue_name(name)?;
    if name.starts_with("amq.") {
        return Err(Error::InvalidQueueName {
            name: hermes_core::driver::excerpt(name),
            reason: "RabbitMQ keeps names starting with 'amq.' for itself",
        });
    }
    Ok(())
}

/// The name of the delay exchange and the delay queue of `level` for the queue `queue`.
pub fn delay_level(queue: &str, level: usize) -> String {
    format!("{queue}.delay.level{level}")
}

/// The exchange a message leaves the ladder through, for the queue `queue`.
pub(crate) fn arrival_exchange(queue: &str) -> String {
    format!("{queue}.delay.arrive")
}

/// The queue holding messages of `queue` whose delay is longer than the ladder holds, until a
/// worker sends them down the ladder again.
pub fn long_delay_queue(queue: &str) -> String {
    format!("{queue}.delay.long")
}

/// The delay queue of earlier versions for `queue` whose messages waited `level_ms`
/// milliseconds.
pub fn legacy_delay_queue(queue: &str, level_ms: u64) -> String {
    format!("{queue}.delay.{level_ms}")
}

/// The queue holding the undecodable messages of `queue`.
pub fn quarantine_queue(queue: &str) -> String {
    format!("{queue}.quarantine")
}

/// Every queue the driver may declare for the queue `queue` (itself, the levels of its delay
/// ladder, its quarantine), and the delay queues earlier versions declared.
pub fn queues_of(queue: &str) -> Vec<String> {
    let mut names = vec![
        queue.to_owned(),
        quarantine_queue(queue),
        long_delay_queue(queue),
    ];
    names.extend((0..DELAY_LEVELS).map(|l| delay_level(queue, l)));
    names.extend(
        LEGACY_DELAY_LEVELS_MS
            .iter()
            .map(|l| legacy_delay_queue(queue, *l)),
    );
    names
}

/// Every exchange the driver may declare for the queue `queue`: the levels of its delay ladder
/// and the exchange it ends in.
pub fn exchanges_of(queue: &str) -> Vec<String> {
    let mut names: Vec<String> = (0..DELAY_LEVELS).map(|l| delay_level(queue, l)).collect();
    names.push(arrival_exchange(queue));
    names
}

/// The header holding a dead letter's id.
pub const DEAD_ID: &str = "x-hermes-dead-id";
/// The header holding why a message is dead: `failed`, `rejected` or `undecodable`.
pub const DEAD_KIND: &str = "x-hermes-dead-kind";
/// The header holding a dead letter's error text.
pub const DEAD_ERROR: &str = "x-hermes-dead-error";
/// The header holding the name of the handler that failed.
pub const DEAD_HANDLER: &str = "x-hermes-dead-handler";
/// The header holding when a message died, as Unix seconds.
pub const DEAD_AT: &str = "x-hermes-dead-at";
/// The header holding how many times a dead message had been retried.
pub const DEAD_RETRIES: &str = "x-hermes-dead-retries";
/// The header holding the priority of the queue a dead letter came from.
pub const PRIORITY: &str = "x-hermes-priority";
