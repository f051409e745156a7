//! What a session declared beyond its plain queues: the levels of each delay ladder, and each
//! dead-letter queue with who caps its length. A new session declares them again.

use std::collections::HashMap;
use std::sync::Mutex;

use super::lock;

/// The delay ladders a session declared: per target queue, how many of its levels.
#[derive(Debug, Default)]
pub(crate) struct Ladders(Mutex<HashMap<String, usize>>);

impl Ladders {
    /// How many levels of `target`'s ladder are declared, from level 0 up.
    pub(crate) fn declared(&self, target: &str) -> usize {
        lock(&self.0).get(target).copied().unwrap_or(0)
    }

    /// Notes that the levels of `target`'s ladder up to `level` are declared.
    pub(crate) fn note(&self, target: &str, level: usize) {
        let mut ladders = lock(&self.0);
        let declared = ladders.entry(target.to_owned()).or_default();
        *declared = (*declared).max(level + 1);
    }
}

/// Per dead-letter queue a session declared: whether the broker caps its length.
#[derive(Debug, Default)]
pub(crate) struct Stores(Mutex<HashMap<String, bool>>);

impl Stores {
    /// Whether the broker caps the length of `store`; `None` when this session did not
    /// declare it.
    pub(crate) fn get(&self, store: &str) -> Option<bool> {
        lock(&self.0).get(store).copied()
    }

    /// Notes that `store` is declared, capped by the broker or not.
    pub(crate) fn note(&self, store: &str, capped_by_broker: bool) {
        lock(&self.0).insert(store.to_owned(), capped_by_broker);
    }
}
