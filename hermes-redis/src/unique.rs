//! Unique jobs: a held key is the string `<default set>_unique-<SHA-256 of the key>` (in the
//! queue's hash slot on a cluster), holding the id of the message that holds it, with the
//! window as its time to live. Taking it and queueing the message are one script.

use hermes_core::driver::{UniqueEmits, async_trait, unique_backend_name};
use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Emitted, Error, Message, Priority, Unique};

use crate::client::{Reply, Write};
use crate::core::Core;
use crate::scripts::Script;

/// A message as a script queues it: its set, its body, its due time (empty: due now) and,
/// for a delayed message of another priority than the default, that priority (else empty).
pub(crate) struct Placed {
    pub(crate) set: std::sync::Arc<str>,
    pub(crate) body: Vec<u8>,
    pub(crate) due: String,
    pub(crate) priority: String,
}

impl Core {
    /// Where a script queues `message` on `priority`, and its body.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`]; the message's and the serializer's errors.
    pub(crate) fn placed(&self, message: &Message, priority: Priority) -> Result<Placed, Error> {
        message.check()?;
        let set = self.sets.get(priority)?;
        let body = self.serializer.serialize(message)?;
        let due = match message.execute_at() {
            Some(at) if at > unix_now() => at.to_string(),
            _ => String::new(),
        };
        let priority = if priority == DEFAULT_PRIORITY || due.is_empty() {
            String::new()
        } else {
            priority.to_string()
        };
        Ok(Placed {
            set,
            body,
            due,
            priority,
        })
    }

    /// The keys of a script that checks `first` and queues a message placed in `set`: `first`,
    /// the set, the schedule and its priority index, and the wake list when `wake`.
    pub(crate) fn placing_keys<'a>(
        &'a self,
        first: &'a str,
        set: &'a str,
        wake: bool,
    ) -> Vec<&'a str> {
        let mut keys = vec![first, set, &self.keys.schedule, &self.keys.schedule_index];
        if wake {
            keys.push(&self.keys.wake);
        }
        keys
    }

    /// The Redis key of the uniqueness key `key`.
    fn unique_key(&self, key: &str) -> String {
        format!("{}_{}", self.keys.default_set, unique_backend_name(key))
    }
}

#[async_trait]
impl UniqueEmits for Core {
    async fn send_unique(
        &self,
        message: &Message,
        priority: Priority,
        unique: &Unique,
    ) -> Result<Emitted, Error> {
        let Placed {
            set,
            body,
            due,
            priority: priority_arg,
        } = self.placed(message, priority)?;
        let lock = self.unique_key(unique.key());
        let carried = self.carry();
        let keys = self.placing_keys(&lock, &set, carried.is_some());
        let window_ms = unique.window().as_millis().max(1).to_string();
        let reply = self
            .emit_write(Write::Script(
                Script::SendUnique,
                &keys,
                &[
                    message.id().as_bytes(),
                    window_ms.as_bytes(),
                    &body,
                    due.as_bytes(),
                    priority_arg.as_bytes(),
                ],
            ))
            .await?;
        if reply == Reply::Int(0) {
            if let Some(carried) = carried {
                carried.unused();
            }
            return Ok(Emitted::Duplicate);
        }
        self.woken(carried, None);
        Ok(Emitted::Queued)
    }

    async fn release(&self, key: &str, holder: &str) -> Result<(), Error> {
        let lock = self.unique_key(key);
        self.client
            .eval(Script::ReleaseUnique, &[&lock], &[holder.as_bytes()])
            .await?;
        Ok(())
    }
}
