//! Deliveries the broker pushed to this process, waiting for a `receive`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use hermes_core::{DecodeError, Message, Priority};
use lapin::Acker;
use tokio::sync::Notify;

use crate::session::Session;

/// One thing a consumer delivered.
// Nearly every entry is a message: boxing it would cost an allocation per delivery to make
// the rare undecodable entry smaller.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Buffered {
    /// A due message, unacknowledged on the broker.
    Message {
        priority: Priority,
        queue: String,
        message: Message,
        /// The body as delivered, for a dead letter.
        body: Vec<u8>,
        acker: Acker,
        session: Arc<Session>,
    },
    /// A body that could not be decoded; it was already quarantined or rejected.
    Undecodable {
        priority: Priority,
        quarantine: String,
        source: DecodeError,
    },
}

impl Buffered {
    fn priority(&self) -> Priority {
        match self {
            Buffered::Message { priority, .. } | Buffered::Undecodable { priority, .. } => {
                *priority
            }
        }
    }

    /// A message whose session is gone: the broker delivers it again on a new one.
    fn stale(&self) -> bool {
        matches!(self, Buffered::Message { session, .. } if !session.alive())
    }
}

/// The deliveries, oldest first, and a wake-up for waiting receives.
#[derive(Debug, Default)]
pub(crate) struct Buffer {
    items: Mutex<VecDeque<Buffered>>,
    pub(crate) arrived: Notify,
}

impl Buffer {
    /// Adds a delivery and wakes one waiting receive.
    pub(crate) fn push(&self, item: Buffered) {
        self.lock().push_back(item);
        self.arrived.notify_one();
    }

    /// The highest priority among buffered deliveries of `selected` priorities, after dropping
    /// those of a lost session.
    pub(crate) fn best(&self, selected: &[Priority]) -> Option<Priority> {
        best_of(&mut self.lock(), selected)
    }

    /// Takes the oldest delivery of the highest buffered priority among `selected`.
    pub(crate) fn take(&self, selected: &[Priority]) -> Option<Buffered> {
        let mut items = self.lock();
        let best = best_of(&mut items, selected)?;
        let index = items.iter().position(|item| item.priority() == best)?;
        items.remove(index)
    }

    /// Takes every delivery.
    pub(crate) fn drain(&self) -> Vec<Buffered> {
        self.lock().drain(..).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Buffered>> {
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The highest priority of `selected` in `items`, after dropping deliveries of a lost session.
fn best_of(items: &mut VecDeque<Buffered>, selected: &[Priority]) -> Option<Priority> {
    items.retain(|item| !item.stale());
    items
        .iter()
        .map(Buffered::priority)
        .filter(|p| selected.contains(p))
        .max()
}
