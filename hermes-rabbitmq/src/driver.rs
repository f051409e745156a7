//! The RabbitMQ driver: the driver struct and its [`Driver`] implementation.

use std::sync::Arc;
use std::time::Duration;

use hermes_core::driver::{Capabilities, Delivery, PriorityQueues};
use hermes_core::inspect::{DeadLetter, DeadReason, QueueState, QueueStats, Replay};
use hermes_core::{
    DEFAULT_PRIORITY, Driver, Error, JsonSerializer, Message, Priority, Serializer, async_trait,
};
use tokio::time::Instant;

use crate::buffer::Buffer;
use crate::naming::{quarantine_queue, validate_rabbitmq_queue_name};
use crate::nodes::Nodes;
use crate::patience::{Patience, Pick};
use crate::session::{Session, bounded};
use crate::settle::receipt;
use crate::{NAME, RabbitMqOptions, settle};

/// Hermes' RabbitMQ driver: one durable queue on the default exchange, declared without
/// arguments (an existing Hermes queue keeps working), persistent messages, consumed with a
/// `basic.qos` prefetch (default 1) and acknowledged after the handlers; publisher confirms (a
/// `send` that returned is on the broker).
///
/// Beyond Hermes: delays of any length without a broker plugin (a ladder of delay queues
/// `<queue>.delay.level<n>` whose TTLs double from level to level: a message is routed through
/// the levels that add up to its delay and dead-lettered to its queue when due, so it never
/// arrives early, whoever consumes the queue; a delay longer than the ladder holds makes several
/// trips), one queue per priority (`setup_priority_queue`), taken
/// highest first, and reconnection after the broker restarts (unacknowledged messages are
/// delivered again by the broker). Undecodable bodies move to `<queue>.quarantine`, or are
/// rejected as in Hermes (see [`UndecodableAction`](crate::UndecodableAction)).
///
/// Inspection and dead letters (see [`Driver::capabilities`]): stats per priority queue from
/// passive declarations (waiting and dead exact, delayed approximate, in flight and latency
/// unknown: AMQP does not tell them), purges of the waiting, delayed and dead messages, and
/// dead letters. No peek and no delete by id: AMQP reads a queue only by taking its messages.
/// The dead letters of a priority queue are its `<queue>.quarantine`, which holds both the
/// undecodable bodies and the messages whose handler failed for good: each is the body
/// exactly as it was delivered, with its reason in AMQP headers ([`DEAD_ID`](crate::DEAD_ID),
/// [`DEAD_KIND`](crate::DEAD_KIND), [`DEAD_ERROR`](crate::DEAD_ERROR),
/// [`DEAD_HANDLER`](crate::DEAD_HANDLER), [`DEAD_AT`](crate::DEAD_AT),
/// [`DEAD_RETRIES`](crate::DEAD_RETRIES), [`PRIORITY`](crate::PRIORITY)). PHP Hermes never
/// reads that queue, and the priority queues keep Hermes' plain JSON bodies, a replayed
/// message's too. A body quarantined by an earlier version, without headers, lists as an
/// undecodable dead letter at time 0, its id made from its digest. Retention: see
/// [`RabbitMqOptions::retention`].
///
/// Clones are cheap and share the connection and the consumers. Nothing connects until the
/// first `send` or `receive`. A `receive` starts one consumer per
/// selected queue; they keep running (holding up to `prefetch` messages each) until
/// [`Driver::flush`] or until the driver is dropped, which gives their messages back.
#[derive(Debug, Clone)]
pub struct RabbitMqDriver {
    pub(crate) inner: Arc<Inner>,
}

/// What the clones of a driver share.
pub(crate) struct Inner {
    nodes: Nodes,
    pub(crate) queue: String,
    pub(crate) options: RabbitMqOptions,
    pub(crate) serializer: Arc<dyn Serializer>,
    pub(crate) queues: PriorityQueues<String>,
    pub(crate) session: tokio::sync::Mutex<Option<Arc<Session>>>,
    pub(crate) buffer: Buffer,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitMqDriver")
            .field("url", &self.nodes)
            .field("queue", &self.queue)
            .field("options", &self.options)
            .field("queues", &self.queues)
            .finish_non_exhaustive()
    }
}

impl RabbitMqDriver {
    /// A driver for the queue `queue` (priority [`DEFAULT_PRIORITY`]) on the broker at `url`
    /// (`amqp://guest:guest@127.0.0.1:5672/%2f`). Nothing connects until first use.
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for an invalid queue name (RabbitMQ also refuses names
    /// starting with `amq.`); [`Error::Config`] for a prefetch of 0, an empty consumer tag, or
    /// properties with an expiration.
    pub fn new(url: &str, queue: &str, options: RabbitMqOptions) -> Result<Self, Error> {
        validate_rabbitmq_queue_name(queue)?;
        options.validate()?;
        let queues = PriorityQueues::with(DEFAULT_PRIORITY, queue.to_owned());
        Ok(RabbitMqDriver::build(
            Nodes::new(url),
            queue,
            options,
            Arc::new(JsonSerializer),
            queues,
        ))
    }

    fn build(
        nodes: Nodes,
        queue: &str,
        options: RabbitMqOptions,
        serializer: Arc<dyn Serializer>,
        queues: PriorityQueues<String>,
    ) -> Self {
        RabbitMqDriver {
            inner: Arc::new(Inner {
                nodes,
                queue: queue.to_owned(),
                options,
                serializer,
                queues,
                session: tokio::sync::Mutex::new(None),
                buffer: Buffer::default(),
            }),
        }
    }

    /// The same queues with `serializer` instead of [`JsonSerializer`], as a new instance (with
    /// a connection of its own). A PHP process sharing the queue reads only Hermes' JSON.
    ///
    /// ```
    /// use hermes_core::JsonSerializer;
    /// use hermes_rabbitmq::{RabbitMqDriver, RabbitMqOptions};
    ///
    /// let driver = RabbitMqDriver::new("amqp://127.0.0.1:5672/%2f", "hermes", RabbitMqOptions::default())?
    ///     .with_serializer(JsonSerializer);
    /// # Ok::<(), hermes_core::Error>(())
    /// ```
    #[must_use]
    pub fn with_serializer(self, serializer: impl Serializer) -> Self {
        RabbitMqDriver::build(
            self.inner.nodes.fresh(),
            &self.inner.queue,
            self.inner.options.clone(),
            Arc::new(serializer),
            self.inner.queues.clone(),
        )
    }

    /// The same queues, also on the other nodes of the broker's cluster at `urls`, as a new
    /// instance (with a connection of its own): when the node in use goes away, the next
    /// connection goes to the next node that answers, in turn. Suits
    /// [`QueueType::Quorum`](crate::QueueType), whose queues live on several nodes.
    ///
    /// ```
    /// use hermes_rabbitmq::{QueueType, RabbitMqDriver, RabbitMqOptions};
    ///
    /// let mut options = RabbitMqOptions::default();
    /// options.queue_type = QueueType::Quorum;
    /// let driver = RabbitMqDriver::new("amqp://guest:guest@node1:5672/%2f", "hermes", options)?
    ///     .with_fallback_urls(["amqp://guest:guest@node2:5672/%2f", "amqp://guest:guest@node3:5672/%2f"]);
    /// # Ok::<(), hermes_core::Error>(())
    /// ```
    #[must_use]
    pub fn with_fallback_urls(self, urls: impl IntoIterator<Item = impl Into<String>>) -> Self {
        RabbitMqDriver::build(
            self.inner.nodes.and(urls.into_iter().map(Into::into)),
            &self.inner.queue,
            self.inner.options.clone(),
            self.inner.serializer.clone(),
            self.inner.queues.clone(),
        )
    }

    /// The queue holding undecodable messages.
    pub fn quarantine_queue(&self) -> String {
        quarantine_queue(&self.inner.queue)
    }

    /// The connected session, connecting (again) when there is none or it was lost.
    pub(crate) async fn session(&self) -> Result<Arc<Session>, Error> {
        let mut slot = self.inner.session.lock().await;
        if let Some(session) = slot.as_ref()
            && session.alive()
        {
            return Ok(session.clone());
        }
        *slot = None;
        let session = Arc::new(self.inner.nodes.connect(&self.inner.options).await?);
        *slot = Some(session.clone());
        Ok(session)
    }
}

#[async_trait]
impl Driver for RabbitMqDriver {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Everything but lease extension, peeking, deleting by id and exact stats: AMQP lists a
    /// queue only by taking its messages, and does not count those other consumers hold.
    fn capabilities(&self) -> Capabilities {
        let mut capabilities = Capabilities::all().without_inspection();
        capabilities.extend = false;
        capabilities.stats = true;
        capabilities.purge = true;
        capabilities.dead_letters = true;
        // A queue of this broker cannot refuse a message whose key another one holds.
        capabilities.unique = false;
        capabilities
    }

    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        validate_rabbitmq_queue_name(name)?;
        self.inner.queues.insert(priority, name.to_owned());
        Ok(())
    }

    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        message.check()?;
        let target = self.inner.queues.get(priority)?;
        let body = self.inner.serializer.serialize(message)?;
        let session = self.session().await?;
        let route = self.route(&session, &target, &body, message.execute_at());
        bounded("publishing", Some(&session), route).await
    }

    /// Publishes every message of the batch in order, then waits for all their confirms
    /// together: about one round trip for the batch. Every message is checked and encoded
    /// before anything is published.
    ///
    /// # Errors
    /// As [`send`](Driver::send); nothing is published when a message is refused. A message
    /// the broker refuses (a nack) or no queue takes fails the call, naming how many of the
    /// batch; the others are queued, confirmed.
    async fn send_batch(&self, messages: &[Message], priority: Priority) -> Result<(), Error> {
        let target = self.inner.queues.get(priority)?;
        let mut bodies = Vec::with_capacity(messages.len());
        for message in messages {
            message.check()?;
            bodies.push((
                self.inner.serializer.serialize(message)?,
                message.execute_at(),
            ));
        }
        if bodies.is_empty() {
            return Ok(());
        }
        let session = self.session().await?;
        let publish = async {
            let mut published = Vec::with_capacity(bodies.len());
            for (body, due) in &bodies {
                published.push(self.start_route(&session, &target, body, *due).await?);
            }
            let confirmed =
                futures_util::future::join_all(published.into_iter().map(|p| p.confirmed())).await;
            let mut failed = confirmed.into_iter().filter_map(Result::err);
            let Some(first) = failed.next() else {
                return Ok(());
            };
            match failed.count() {
                0 => Err(first),
                others => Err(Error::driver(
                    crate::NAME,
                    format!(
                        "{} of {} messages for {target} were not confirmed: {first}",
                        others + 1,
                        bodies.len()
                    ),
                    true,
                )),
            }
        };
        bounded("publishing a batch", Some(&session), publish).await
    }

    /// Waits for a delivery from the consumers of the selected queues, starting them on first
    /// use (and again after a reconnection).
    ///
    /// # Cancellation safety
    /// Safe: a delivery is only taken out of the driver's buffer when it is returned.
    async fn receive(
        &self,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        let queues = self.inner.queues.selected(priorities)?;
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
                bounded("starting the consumers", Some(&session), consume).await?;
                let pick = self.pick(&session, &queues, patience.lasts());
                bounded("looking at the queues", Some(&session), pick).await
            };
            let arrived = self.inner.buffer.arrived.notified();
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
                Pick::HigherComing => patience.wait(),
                Pick::Nothing => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Ok(None);
                    }
                    (deadline - now).min(self.inner.options.refresh_interval)
                }
            };
            tokio::select! {
                _ = &mut arrived => {}
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        settle::ack(delivery).await
    }

    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        settle::nack(delivery).await
    }

    /// Stops this process's consumers and gives back the messages they delivered that no
    /// `receive` took. A later `receive` starts the consumers again.
    async fn flush(&self) -> Result<(), Error> {
        self.stop_consumers().await;
        self.give_back_buffered().await
    }

    /// Per priority queue: waiting exact (its ready messages), delayed approximate (the ready
    /// messages of its delay queues: one passing between two of them is missed for a moment),
    /// dead exact (the ready messages of its `<queue>.quarantine`), in flight and latency
    /// unknown (AMQP does not tell them). A queue not declared yet counts 0; nothing is
    /// declared.
    async fn stats(&self) -> Result<Vec<QueueStats>, Error> {
        self.stats_now().await
    }

    /// Up to `limit` dead letters of `<queue>.quarantine`, oldest first, taken with
    /// `basic.get` and given back to their places unchanged (while listed, they are invisible
    /// to another listing or replay). Drops those past the retention's age on the way.
    async fn dead_letters(
        &self,
        priority: Priority,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, Error> {
        self.dead_letters_now(priority, limit).await
    }

    /// Publishes the body of `delivery`, byte for byte as it was delivered, to the
    /// `<queue>.quarantine` of its priority queue with the reason in its headers, waits for
    /// the broker's confirm, and only then acknowledges the delivery: a lost connection in
    /// between leaves the message to be delivered again (and maybe a dead letter too), never
    /// lost.
    ///
    /// # Errors
    /// A temporary [`Error::Connection`] when the delivery's connection is gone (the broker
    /// delivers the message again).
    async fn dead_letter(&self, delivery: &Delivery, reason: &DeadReason) -> Result<(), Error> {
        let receipt = receipt(delivery)?;
        if !receipt.session.alive() {
            return Err(Error::connection(
                NAME,
                "the connection of this delivery is gone; the broker delivers it again",
            ));
        }
        let priority = delivery.priority();
        let home = self.inner.queues.get(priority)?;
        let id = delivery.message().id();
        let session = &receipt.session;
        self.bury(session, (&home, priority), id, &receipt.body, reason)
            .await?;
        settle::ack(delivery).await
    }

    /// Takes the dead letters of `<queue>.quarantine` one by one with `basic.get` (only those
    /// there when it begins); each one `replay` selects is published to its priority queue,
    /// due now, with the broker's confirm (an undecodable one as its exact bytes), then
    /// removed; the others go back to their places. A letter being replayed is invisible to
    /// another replay, so two at once do not put one back twice.
    async fn replay(&self, priority: Priority, replay: &Replay) -> Result<u64, Error> {
        self.replay_now(priority, replay).await
    }

    /// Waiting: `queue.purge` of the priority queue (messages a worker holds, its prefetch
    /// included, are in flight and stay). Delayed: `queue.purge` of each of its delay queues.
    /// Dead: `queue.purge` of its `<queue>.quarantine`. Returns how many went.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for [`QueueState::InFlight`].
    async fn purge(&self, priority: Priority, state: QueueState) -> Result<Option<u64>, Error> {
        self.purge_now(priority, state).await
    }
}
