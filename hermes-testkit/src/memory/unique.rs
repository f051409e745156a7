//! The memory driver's unique emits: keys held under the same lock as the queues.

use hermes_core::driver::{UniqueEmits, async_trait};
use hermes_core::{Emitted, Error, Message, Priority, Unique};
use tokio::time::Instant;

use super::{HeldKey, MemoryDriver};

#[async_trait]
impl UniqueEmits for MemoryDriver {
    async fn send_unique(
        &self,
        message: &Message,
        priority: Priority,
        unique: &Unique,
    ) -> Result<Emitted, Error> {
        let body = self.encode(message)?;
        let now = Instant::now();
        let mut state = self.lock();
        state.unique.retain(|_, held| held.until > now);
        if state.unique.contains_key(unique.key()) {
            return Ok(Emitted::Duplicate);
        }
        state.put(message, priority, body)?;
        let held = HeldKey {
            holder: message.id().to_owned(),
            until: now + unique.window(),
        };
        state.unique.insert(unique.key().to_owned(), held);
        drop(state);
        self.shared.notify.notify_waiters();
        Ok(Emitted::Queued)
    }

    async fn release(&self, key: &str, holder: &str) -> Result<(), Error> {
        let mut state = self.lock();
        if state
            .unique
            .get(key)
            .is_some_and(|held| held.holder == holder)
        {
            state.unique.remove(key);
        }
        Ok(())
    }
}
