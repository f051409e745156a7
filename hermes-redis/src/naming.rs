//! The key names of one queue.

use hermes_core::Error;
use hermes_core::driver::validate_queue_name;

use crate::RedisOptions;

/// The keys of one queue: Hermes' own (`hermes`, `hermes_schedule`, one set per priority) and
/// the driver's additions, named after them.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    prefix: String,
    /// The set of the default priority.
    pub(crate) default_set: String,
    pub(crate) schedule: String,
    /// The priorities of delayed messages sent to another priority than the default: the sorted
    /// set of `<priority>|<message>`, scored by the due time.
    pub(crate) schedule_index: String,
    /// The hash `<message>` → priority older versions kept instead; read, never written.
    pub(crate) legacy_schedule_priorities: String,
    /// Claimed messages: `<priority>|<message>` → claim time.
    pub(crate) in_flight: String,
    /// The announcements of live workers: id → announcement.
    pub(crate) workers: String,
    /// The list an idle worker blocks on, poked by Rust emitters (one token at most).
    pub(crate) wake: String,
    /// The set of what is paused (`priority:<n>`, `type:<name>`).
    pub(crate) paused: String,
    /// Cancelled message ids, scored by the time of the request.
    pub(crate) cancelled: String,
    /// The requests to cancel: id → record.
    pub(crate) cancellations: String,
    /// The prefix of the counters' buckets: `<key>_counters:<bucket>`, a hash each.
    pub(crate) counters: String,
    /// The job records kept: the sorted set of their keys, scored by when each expires (Unix
    /// milliseconds).
    pub(crate) records: String,
    /// The groups kept: the sorted set of their hashes' keys, scored by when each was created
    /// (negated Unix milliseconds).
    pub(crate) groups: String,
}

impl Keys {
    pub(crate) fn new(options: &RedisOptions) -> Result<Self, Error> {
        validate_queue_name(&options.key)?;
        validate_queue_name(&options.schedule_key)?;
        if let Some(tag) = &options.hash_tag {
            validate_queue_name(tag)?;
        }
        let prefix = options
            .hash_tag
            .as_ref()
            .map_or_else(String::new, |tag| format!("{{{tag}}}"));
        let key = |name: &str| format!("{prefix}{name}");
        Ok(Keys {
            default_set: key(&options.key),
            schedule: key(&options.schedule_key),
            schedule_index: key(&format!("{}_by_priority", options.schedule_key)),
            legacy_schedule_priorities: key(&format!("{}_priorities", options.schedule_key)),
            in_flight: key(&format!("{}_in_flight", options.key)),
            workers: key(&format!("{}_workers", options.key)),
            wake: key(&format!("{}_wake", options.key)),
            paused: key(&format!("{}_paused", options.key)),
            cancelled: key(&format!("{}_cancelled", options.key)),
            cancellations: key(&format!("{}_cancellations", options.key)),
            counters: key(&format!("{}_counters", options.key)),
            records: key(&format!("{}_records", options.key)),
            groups: key(&format!("{}_groups", options.key)),
            prefix,
        })
    }

    /// The dead letters of the queue whose set is `set`: the sorted set of their ids, scored by
    /// the time they died, and the hash of their records.
    pub(crate) fn dead(set: &str) -> (String, String) {
        (format!("{set}_dead"), format!("{set}_dead_letters"))
    }

    /// The key of a priority set called `name`.
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for an invalid name, or one that is a key the queue already
    /// uses (the schedule, its index, the claims) or ends like a dead-letter key.
    pub(crate) fn set(&self, name: &str) -> Result<String, Error> {
        validate_queue_name(name)?;
        let key = format!("{}{name}", self.prefix);
        let taken = [
            &self.schedule,
            &self.schedule_index,
            &self.legacy_schedule_priorities,
            &self.in_flight,
            &self.workers,
            &self.wake,
            &self.paused,
            &self.cancelled,
            &self.cancellations,
            &self.records,
            &self.groups,
        ]
        .contains(&&key);
        if taken || name.ends_with("_dead") || name.ends_with("_dead_letters") {
            return Err(Error::InvalidQueueName {
                name: hermes_core::driver::excerpt(name),
                reason: "the name is one of the queue's own keys (its schedule, claims, workers, controls or dead letters)",
            });
        }
        Ok(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_keys_are_hermes_keys_and_a_tag_prefixes_all() {
        let keys = Keys::new(&RedisOptions::default()).unwrap();
        assert_eq!(keys.default_set, "hermes");
        assert_eq!(keys.schedule, "hermes_schedule");
        assert_eq!(keys.set("hermes_high").unwrap(), "hermes_high");
        assert_eq!(
            Keys::dead("{jobs}hermes"),
            (
                "{jobs}hermes_dead".to_owned(),
                "{jobs}hermes_dead_letters".to_owned()
            )
        );
        let mut options = RedisOptions {
            hash_tag: Some("jobs".into()),
            ..RedisOptions::default()
        };
        let keys = Keys::new(&options).unwrap();
        for key in [
            &keys.default_set,
            &keys.schedule,
            &keys.in_flight,
            &keys.schedule_index,
            &keys.legacy_schedule_priorities,
            &keys.wake,
        ] {
            assert!(key.starts_with("{jobs}"), "{key}");
        }
        assert!(keys.set("a b").is_err());
        assert!(keys.set("hermes_dead").is_err());
        assert!(keys.set("hermes_in_flight").is_err());
        assert!(keys.set("hermes_wake").is_err());
        options.hash_tag = Some("}x{".into());
        assert!(Keys::new(&options).is_err());
    }
}
