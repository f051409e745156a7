//! Receiving: the consumers of the selected queues started (see `consumers`), then the best
//! delivery taken from the buffer they fill. Each priority queue has a consumer of its own, so
//! a `receive` holding only lower-priority deliveries waits a little for a higher-priority
//! message the broker is about to deliver (priority patience), and messages come out highest
//! priority first.

use std::sync::Arc;
use std::time::Duration;

use hermes_core::driver::Delivery;
use hermes_core::{Error, Priority};
use tokio::time::Instant;

use crate::amqp::Session;
use crate::core::Core;

/// How long a `receive` holding a lower-priority message waits for a higher-priority one the
/// broker is about to deliver.
const HIGHER_PRIORITY_PATIENCE: Duration = Duration::from_millis(250);

/// How often a waiting `receive` looks at the buffer again while a higher-priority message is
/// on its way (an arrival wakes it sooner).
const LOOK_AGAIN: Duration = Duration::from_millis(5);

/// How long a `receive` waits for the consumers' forwarders to file a delivery that may have
/// reached the connection already (an arrival wakes it sooner).
const FILING_GRACE: Duration = Duration::from_millis(20);

/// What a look at the buffer found.
// A return value matched at once by the caller: boxing the delivery would cost an allocation
// per message to save a move of a few hundred bytes.
#[allow(clippy::large_enum_variant)]
enum Pick {
    /// The best delivery, or the error of an undecodable body.
    Found(Result<Delivery, Error>),
    /// Only lower-priority messages, while a higher-priority one is on its way: look again
    /// after at most this long.
    HigherComing(Duration),
    /// Nothing buffered for the selected queues.
    Nothing,
}

/// The patience of one `receive`: it waits for higher-priority messages for at most
/// [`HIGHER_PRIORITY_PATIENCE`] in all.
#[derive(Debug, Default)]
struct Patience {
    until: Option<Instant>,
}

impl Patience {
    /// Whether the `receive` still waits for higher-priority messages.
    fn lasts(&self) -> bool {
        self.until.is_none_or(|until| Instant::now() < until)
    }

    /// Notes a wait for a higher-priority message (the first one starts the patience).
    fn wait(&mut self) {
        self.until
            .get_or_insert_with(|| Instant::now() + HIGHER_PRIORITY_PATIENCE);
    }
}

impl Core {
    /// Waits for a delivery from the consumers of the selected queues, starting them on first
    /// use (and again after a reconnection).
    ///
    /// # Cancellation safety
    /// Safe: a delivery is only taken out of the buffer when it is returned.
    pub(crate) async fn receive(
        self: &Arc<Self>,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        let queues = self.queues.selected(priorities)?;
        let deadline = Instant::now() + wait;
        let mut patience = Patience::default();
        // A connection lost before anything was taken is tried once more on a new one: a
        // broker under load can close it while a consumer starts on a queue it just declared
        // (RabbitMQ 3.10 answers a quorum queue whose process is not up yet with
        // INTERNAL_ERROR). A second loss is the caller's.
        let mut lost_once = false;
        loop {
            let session = self.session().await?;
            let consume = self.consume(&session, &queues);
            let pick = async {
                session.bounded("starting the consumers", consume).await?;
                let pick = self.pick(&session, &queues, patience.lasts());
                session.bounded("looking at the queues", pick).await
            };
            let arrived = self.buffer.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            let picked = match pick.await {
                Err(e) if e.is_temporary() && !lost_once && Instant::now() < deadline => {
                    lost_once = true;
                    tracing::debug!("Receiving again on a new connection - {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                picked => picked?,
            };
            let pause = match picked {
                Pick::Found(delivery) => return delivery.map(Some),
                Pick::HigherComing(pause) => {
                    patience.wait();
                    pause
                }
                Pick::Nothing => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Ok(None);
                    }
                    (deadline - now).min(self.options.refresh_interval)
                }
            };
            tokio::select! {
                _ = &mut arrived => {}
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Takes the best buffered delivery of `queues`. When `patient`, a lower-priority message
    /// is not taken while a higher-priority queue has messages its consumer is about to get:
    /// the one the broker sends after an acknowledgement freed a slot of its full consumer,
    /// ready ones the consumer has room for, or (once per freed slot) one the broker sent
    /// before it counted none ready, which the consumer's forwarder is still filing.
    async fn pick(
        &self,
        session: &Session,
        queues: &[(Priority, String)],
        patient: bool,
    ) -> Result<Pick, Error> {
        let selected: Vec<Priority> = queues.iter().map(|(p, _)| *p).collect();
        let Some(best) = self.buffer.best(&selected) else {
            return Ok(Pick::Nothing);
        };
        if patient {
            for (_, queue) in queues.iter().filter(|(p, _)| *p > best) {
                if session.flows.refill_expected(queue) {
                    return Ok(Pick::HigherComing(LOOK_AGAIN));
                }
                if !session.flows.has_room(queue) {
                    continue;
                }
                if session.ready_behind_deliveries(queue).await? > 0 {
                    return Ok(Pick::HigherComing(LOOK_AGAIN));
                }
                if session.flows.look_again_for_refill(queue) {
                    return Ok(Pick::HigherComing(FILING_GRACE));
                }
            }
        }
        // The highest priority buffered now: a message filed since `best` was read (its
        // consumer found full above) is taken instead.
        let Some(item) = self.buffer.take(&selected) else {
            return Ok(Pick::Nothing);
        };
        Ok(Pick::Found(item.handed_out()))
    }
}
