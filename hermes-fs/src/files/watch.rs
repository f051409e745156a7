//! Change notifications: keep the indexes current and wake idle workers when files appear.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use notify::event::{EventKind, ModifyKind, RenameMode};
use notify::{Event, RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::Notify;

use super::QueueDir;

/// Watches the `new/` folders of the queues a worker reads.
pub(crate) struct Watcher {
    watcher: Option<RecommendedWatcher>,
    routes: Arc<Mutex<HashMap<PathBuf, Arc<QueueDir>>>>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("active", &self.watcher.is_some())
            .finish()
    }
}

impl Watcher {
    /// Starts the notification thread; without notifications (disabled, or the system refuses),
    /// every `watch` returns false and workers poll.
    pub(crate) fn start(enabled: bool, wake: Arc<Notify>) -> Self {
        let routes: Arc<Mutex<HashMap<PathBuf, Arc<QueueDir>>>> = Arc::default();
        let watcher = enabled.then(|| {
            let routes = routes.clone();
            notify::recommended_watcher(move |event: notify::Result<Event>| {
                route(&routes, event);
                wake.notify_waiters();
            })
        });
        let watcher = match watcher {
            Some(Ok(watcher)) => Some(watcher),
            Some(Err(e)) => {
                tracing::warn!("File change notifications are unavailable, polling instead: {e}");
                None
            }
            None => None,
        };
        Watcher { watcher, routes }
    }

    /// Starts watching the `new/` folder of `queue`; false when notifications are unavailable.
    pub(crate) fn watch(&mut self, queue: &Arc<QueueDir>) -> bool {
        let Some(watcher) = self.watcher.as_mut() else {
            return false;
        };
        self.routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(queue.new.clone(), queue.clone());
        match watcher.watch(&queue.new, RecursiveMode::NonRecursive) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(
                    "Cannot watch {}, polling it instead: {e}",
                    queue.new.display()
                );
                false
            }
        }
    }
}

impl Watcher {
    /// Stops watching the `new/` folder of `queue`.
    pub(crate) fn unwatch(&mut self, queue: &QueueDir) {
        if let Some(watcher) = self.watcher.as_mut() {
            let _ = watcher.unwatch(&queue.new);
        }
    }
}

fn route(routes: &Mutex<HashMap<PathBuf, Arc<QueueDir>>>, event: notify::Result<Event>) {
    let routes = routes.lock().unwrap_or_else(|e| e.into_inner());
    let event = match event {
        Ok(event) => event,
        Err(_) => {
            rescan_all(&routes);
            return;
        }
    };
    if event.need_rescan() {
        rescan_all(&routes);
        return;
    }
    fn queue_of<'a>(
        routes: &'a HashMap<PathBuf, Arc<QueueDir>>,
        path: &'a Path,
    ) -> Option<(&'a Arc<QueueDir>, &'a str)> {
        let queue = routes.get(path.parent()?)?;
        Some((queue, path.file_name()?.to_str()?))
    }
    match event.kind {
        EventKind::Create(_) | EventKind::Modify(ModifyKind::Name(RenameMode::To)) => {
            for (queue, file) in event.paths.iter().filter_map(|p| queue_of(&routes, p)) {
                queue.added(file);
            }
        }
        EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(RenameMode::From)) => {
            for (queue, file) in event.paths.iter().filter_map(|p| queue_of(&routes, p)) {
                queue.removed(file);
            }
        }
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {
            if let [from, to] = event.paths.as_slice() {
                if let Some((queue, file)) = queue_of(&routes, from) {
                    queue.removed(file);
                }
                if let Some((queue, file)) = queue_of(&routes, to) {
                    queue.added(file);
                }
            }
        }
        EventKind::Modify(ModifyKind::Name(_)) | EventKind::Any | EventKind::Other => {
            // A rename of unknown direction: ask the folder.
            for (queue, file) in event.paths.iter().filter_map(|p| queue_of(&routes, p)) {
                if queue.new.join(file).exists() {
                    queue.added(file);
                } else {
                    queue.removed(file);
                }
            }
        }
        _ => {}
    }
}

fn rescan_all(routes: &HashMap<PathBuf, Arc<QueueDir>>) {
    for queue in routes.values() {
        queue.lock().rescan = true;
    }
}
