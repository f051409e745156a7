//! The queues a driver has set up, by priority.

use std::collections::BTreeMap;
use std::sync::RwLock;

use crate::{Error, Priority};

/// A driver's queues by priority, shared by its tasks: what `setup_priority_queue` records and
/// what `send` and `receive` look up.
#[derive(Debug)]
pub struct PriorityQueues<Q> {
    queues: RwLock<BTreeMap<Priority, Q>>,
}

/// An independent copy: queues set up on one later do not show in the other.
impl<Q: Clone> Clone for PriorityQueues<Q> {
    fn clone(&self) -> Self {
        PriorityQueues {
            queues: RwLock::new(self.read().clone()),
        }
    }
}

impl<Q> Default for PriorityQueues<Q> {
    fn default() -> Self {
        PriorityQueues {
            queues: RwLock::new(BTreeMap::new()),
        }
    }
}

impl<Q: Clone> PriorityQueues<Q> {
    /// Queues holding `queue` for `priority`.
    pub fn with(priority: Priority, queue: Q) -> Self {
        PriorityQueues {
            queues: RwLock::new(BTreeMap::from([(priority, queue)])),
        }
    }

    /// Sets the queue of `priority`, replacing any.
    pub fn insert(&self, priority: Priority, queue: Q) {
        self.write().insert(priority, queue);
    }

    /// The queue of `priority`.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`] when none is set up.
    pub fn get(&self, priority: Priority) -> Result<Q, Error> {
        self.read()
            .get(&priority)
            .cloned()
            .ok_or(Error::UnknownPriority(priority))
    }

    /// The queue of `priority`, or of `fallback` when `priority` has none.
    pub fn get_or(&self, priority: Priority, fallback: Priority) -> Option<Q> {
        let queues = self.read();
        queues
            .get(&priority)
            .or_else(|| queues.get(&fallback))
            .cloned()
    }

    /// Every queue, highest priority first, each marked with whether the filter `priorities`
    /// (empty = all) selects it.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`] for a filter naming a priority without a queue.
    pub fn marked(&self, priorities: &[Priority]) -> Result<Vec<(Priority, Q, bool)>, Error> {
        let queues = self.read();
        if let Some(p) = priorities.iter().find(|p| !queues.contains_key(p)) {
            return Err(Error::UnknownPriority(*p));
        }
        Ok(queues
            .iter()
            .rev()
            .map(|(p, q)| {
                (
                    *p,
                    q.clone(),
                    priorities.is_empty() || priorities.contains(p),
                )
            })
            .collect())
    }

    /// The queues the filter `priorities` (empty = all) selects, highest priority first.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`] for a filter naming a priority without a queue.
    pub fn selected(&self, priorities: &[Priority]) -> Result<Vec<(Priority, Q)>, Error> {
        Ok(self
            .marked(priorities)?
            .into_iter()
            .filter_map(|(p, q, selected)| selected.then_some((p, q)))
            .collect())
    }

    /// Every queue, highest priority first.
    pub fn all(&self) -> Vec<(Priority, Q)> {
        self.read()
            .iter()
            .rev()
            .map(|(p, q)| (*p, q.clone()))
            .collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<Priority, Q>> {
        self.queues.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<Priority, Q>> {
        self.queues.write().unwrap_or_else(|e| e.into_inner())
    }
}
