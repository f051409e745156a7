//! Scenarios of live workers: announced, listed until they stop or expire.

use std::sync::Arc;
use std::time::Duration;

use hermes_core::workers::{RunningMessage, WorkerInfo};
use hermes_core::{DEFAULT_PRIORITY, Dispatcher, DispatcherOptions, Driver};

use super::support::{PATIENCE, message, open, send};
use super::{Harness, Outcome};

/// A worker's announcement is listed until it expires or is withdrawn, with what it said; a
/// dispatcher announces itself while it runs, with the message it handles, and withdraws when
/// it stops.
pub async fn workers_are_listed_until_they_expire<H: Harness>(h: &H, queue: &str) -> Outcome {
    let driver: Arc<dyn Driver> = Arc::new(open(h, queue).await);
    let Some(workers) = driver.workers() else {
        return Outcome::lacks_facet("workers");
    };
    let brief = WorkerInfo::new(2, &[DEFAULT_PRIORITY], Duration::from_secs(1));
    let mut lasting = WorkerInfo::new(4, &[], Duration::from_secs(60));
    lasting
        .running
        .push(RunningMessage::new("m-1", "report.export", 1.0));
    lasting.busy = 1;
    lasting.handled = 7;
    lasting.failed = 2;
    workers
        .announce(&brief, Duration::from_secs(1))
        .await
        .expect("announcing");
    workers
        .announce(&lasting, Duration::from_secs(60))
        .await
        .expect("announcing");
    let listed = workers.list().await.expect("listing workers");
    let ids: Vec<&str> = listed.iter().map(|w| w.id.as_str()).collect();
    assert!(
        ids.contains(&brief.id.as_str()) && ids.contains(&lasting.id.as_str()),
        "{ids:?}"
    );
    let found = listed.iter().find(|w| w.id == lasting.id).expect("listed");
    assert_eq!(found.running, lasting.running);
    assert_eq!((found.busy, found.concurrency), (1, 4));
    assert_eq!((found.handled, found.failed), (7, 2));
    assert!(found.announced > 0.0 && found.announced < found.expires);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let listed = workers.list().await.expect("listing workers");
    assert!(listed.iter().all(|w| w.id != brief.id), "expired, so gone");
    workers.withdraw(&lasting.id).await.expect("withdrawing");
    assert!(
        workers
            .list()
            .await
            .expect("listing workers")
            .iter()
            .all(|w| w.id != lasting.id),
        "withdrawn, so gone"
    );

    // A dispatcher announces itself while it runs and withdraws when it stops.
    send(&driver, &message("slow", 1), DEFAULT_PRIORITY).await;
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let started_tx = std::sync::Mutex::new(Some(started_tx));
    let (release_tx, release_rx) = tokio::sync::watch::channel(false);
    let mut options = DispatcherOptions::default();
    options.max_items = 1;
    // Renewed every half second, so the running message shows soon.
    options.announce_ttl = Some(Duration::from_millis(1500));
    let mut dispatcher = Dispatcher::from_arc(driver.clone()).options(options);
    dispatcher.register_fn("slow", move |_m| {
        let started = started_tx.lock().unwrap().take();
        let mut release = release_rx.clone();
        async move {
            if let Some(started) = started {
                let _ = started.send(());
            }
            let _ = release.wait_for(|go| *go).await;
            Ok(true)
        }
    });
    let running = tokio::spawn(async move { dispatcher.handle(&[]).await });
    tokio::time::timeout(PATIENCE, started_rx)
        .await
        .expect("the handler started")
        .expect("the handler started");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let me = loop {
        let found = workers
            .list()
            .await
            .expect("listing workers")
            .into_iter()
            .find(|w| {
                w.pid == std::process::id() && w.running.iter().any(|r| r.message_type == "slow")
            });
        if let Some(me) = found {
            break me;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the running dispatcher announced itself with its message"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(me.busy, 1);
    release_tx.send(true).expect("releasing");
    tokio::time::timeout(PATIENCE, running)
        .await
        .expect("the dispatcher stopped")
        .expect("the dispatcher task")
        .expect("the dispatcher");
    assert!(
        workers
            .list()
            .await
            .expect("listing workers")
            .iter()
            .all(|w| w.id != me.id),
        "a stopped dispatcher withdraws"
    );
    Outcome::Passed
}
