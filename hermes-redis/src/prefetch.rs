//! Messages claimed ahead: they wait in this process's buffer for a `receive`, for at most
//! half the visibility timeout, and are given back when they wait longer.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use hermes_core::Priority;

use crate::claim::Taken;
use crate::driver::{Inner, RedisSetDriver};

/// Clears [`Inner::sweeper`] when the sweeper task ends or is dropped.
struct SweeperRunning(Weak<Inner>);

impl Drop for SweeperRunning {
    fn drop(&mut self) {
        if let Some(inner) = self.0.upgrade() {
            inner.sweeper.store(false, Ordering::Release);
        }
    }
}

impl RedisSetDriver {
    /// The messages claimed ahead, in claim order.
    pub(crate) fn buffer(&self) -> std::sync::MutexGuard<'_, VecDeque<Taken>> {
        self.inner.buffer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long a message claimed ahead may wait in the buffer: half the visibility timeout,
    /// so a handler that gets it has at least that much of its claim left.
    fn hold_limit(&self) -> Duration {
        self.inner.options.visibility_timeout / 2
    }

    /// Takes the buffered messages held for the hold limit or longer out of the buffer. The
    /// buffer is in claim order, so they are at its front.
    fn take_stale(&self) -> Vec<Taken> {
        let limit = self.hold_limit();
        let mut buffer = self.buffer();
        let mut stale = Vec::new();
        while buffer.front().is_some_and(|t| t.at.elapsed() >= limit) {
            stale.extend(buffer.pop_front());
        }
        stale
    }

    /// Gives back `stale` messages in a task of its own. A claim that expired meanwhile is
    /// left alone (its token no longer matches), so a message another worker took runs once.
    fn return_in_background(&self, stale: Vec<Taken>) {
        if stale.is_empty() {
            return;
        }
        let driver = self.clone();
        tokio::spawn(async move {
            let _ = driver.give_back_all(&stale).await;
        });
    }

    /// Takes the first buffered message of `priorities`. Messages held for the hold limit are
    /// given back instead of handed out.
    pub(crate) fn take_buffered(&self, priorities: &[Priority]) -> Option<Taken> {
        let stale = self.take_stale();
        self.return_in_background(stale);
        let mut buffer = self.buffer();
        let index = buffer
            .iter()
            .position(|c| priorities.is_empty() || priorities.contains(&c.priority));
        index.and_then(|i| buffer.remove(i))
    }

    /// Starts, once, the task that gives back buffered messages when they reach the hold
    /// limit, even when no `receive` comes (the worker's handlers are all busy). It holds the
    /// driver weakly and ends with it.
    pub(crate) fn start_buffer_sweeper(&self) {
        if self.inner.sweeper.swap(true, Ordering::AcqRel) {
            return;
        }
        let inner: Weak<Inner> = Arc::downgrade(&self.inner);
        let limit = self.hold_limit();
        tokio::spawn(async move {
            // Lets a later claim start another sweeper when this one's runtime shuts down.
            let _running = SweeperRunning(inner.clone());
            loop {
                let Some(inner) = inner.upgrade() else { return };
                let driver = RedisSetDriver { inner };
                let _ = driver.give_back_all(&driver.take_stale()).await;
                // The buffer is in claim order: its front reaches the limit first.
                let next = driver
                    .buffer()
                    .front()
                    .map_or(limit, |t| limit.saturating_sub(t.at.elapsed()));
                drop(driver);
                tokio::time::sleep(next.max(Duration::from_millis(10))).await;
            }
        });
    }
}
