//! A handler that records what it handled.

use std::sync::{Arc, Mutex};

use hermes_core::{Handler, Message, handler_fn};

/// The ids of the messages a [`recording_handler`] handled, in the order it handled them.
pub type Handled = Arc<Mutex<Vec<String>>>;

/// A handler that succeeds and appends each message's id to the returned list.
///
/// ```
/// let (handler, handled) = hermes_testkit::recording_handler();
/// # let _ = handler;
/// assert!(handled.lock().unwrap().is_empty());
/// ```
pub fn recording_handler() -> (Arc<dyn Handler>, Handled) {
    let handled = Handled::default();
    let record = handled.clone();
    let handler = handler_fn(move |m: Message| {
        let record = record.clone();
        async move {
            record
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(m.id().to_owned());
            Ok(true)
        }
    });
    (Arc::new(handler), handled)
}
