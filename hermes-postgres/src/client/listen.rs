//! Listening for the schema's notifications on a connection of its own, opened when a worker
//! first waits and opened again when it breaks.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hermes_core::CancellationToken;
use tokio::sync::watch;

/// Counts the notifications of one channel: a waiter notes the count before it looks at the
/// table, and wakes when the count moves.
#[derive(Debug)]
pub(crate) struct Listener {
    config: tokio_postgres::Config,
    channel: String,
    count: watch::Sender<u64>,
    started: Arc<AtomicBool>,
    /// Ends the listening task when the listener is dropped.
    stop: CancellationToken,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Clears [`Listener::started`] when the listening task ends.
struct Started(Arc<AtomicBool>);

impl Drop for Started {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// How long the listening task waits before it opens a broken connection again.
const RECONNECT_AFTER: Duration = Duration::from_millis(500);

impl Listener {
    /// A listener of `channel` on a connection with `config`, not started.
    pub(crate) fn new(config: tokio_postgres::Config, channel: String) -> Self {
        Listener {
            config,
            channel,
            count: watch::Sender::new(0),
            started: Arc::default(),
            stop: CancellationToken::new(),
        }
    }

    /// A receiver of the count, starting the listening task on the first call.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        if !self.started.swap(true, Ordering::AcqRel) {
            let (config, channel, count, stop, started) = (
                self.config.clone(),
                self.channel.clone(),
                self.count.clone(),
                self.stop.clone(),
                self.started.clone(),
            );
            tokio::spawn(async move {
                // Should the task die with its runtime, the next waiter starts another.
                let _started = Started(started);
                stop.clone()
                    .run_until_cancelled_owned(listen(config, channel, count, stop))
                    .await
            });
        }
        self.count.subscribe()
    }
}

/// Listens until `stop`, opening the connection again when it breaks.
async fn listen(
    config: tokio_postgres::Config,
    channel: String,
    count: watch::Sender<u64>,
    stop: CancellationToken,
) {
    while !stop.is_cancelled() {
        if let Err(e) = listen_once(&config, &channel, &count).await {
            tracing::debug!(error = %e, "Listening for notifications failed; opening again");
        }
        // Whatever was sent meanwhile is found by the next look.
        count.send_modify(|n| *n += 1);
        tokio::time::sleep(RECONNECT_AFTER).await;
    }
}

/// One connection's life: `LISTEN`, then a count for each notification, until it breaks.
async fn listen_once(
    config: &tokio_postgres::Config,
    channel: &str,
    count: &watch::Sender<u64>,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(tokio_postgres::NoTls).await?;
    let (messages_tx, mut messages) = tokio::sync::mpsc::unbounded_channel();
    // The connection's messages, notifications among them, come only while it is polled.
    let driving = tokio::spawn(async move {
        while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            if messages_tx.send(message).is_err() {
                break;
            }
        }
    });
    let listened = client.batch_execute(&format!("LISTEN \"{channel}\"")).await;
    if let Err(e) = listened {
        driving.abort();
        return Err(e);
    }
    // A notification sent before the LISTEN took effect is found by the next look, and a
    // waiter that began to wait before is woken.
    count.send_modify(|n| *n += 1);
    while let Some(message) = messages.recv().await {
        match message {
            Ok(tokio_postgres::AsyncMessage::Notification(_)) => count.send_modify(|n| *n += 1),
            Ok(_) => {}
            Err(e) => {
                driving.abort();
                return Err(e);
            }
        }
    }
    driving.abort();
    drop(client);
    Ok(())
}
