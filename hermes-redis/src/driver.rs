//! The Redis driver: Hermes' sets and schedule, plus claims for at-least-once delivery.

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_core::driver::{Capabilities, Delivery, PriorityQueues};
use hermes_core::inspect::{DeadLetter, DeadReason, QueueState, QueueStats, Replay};
use hermes_core::time::{poll, unix_now};
use hermes_core::workers::WorkerInfo;
use hermes_core::{
    DEFAULT_PRIORITY, Driver, Error, JsonSerializer, Message, Priority, Serializer, async_trait,
};

use crate::claim::{RedisReceipt, Taken};
use crate::client::RedisClient;
use crate::naming::Keys;
use crate::scripts::Script;
use crate::wake::OpenListener;
use crate::{DeliveryMode, RedisOptions};

/// Hermes' Redis driver: a set per priority (`hermes` for priority 100), delayed messages in the
/// sorted set `hermes_schedule` scored by their due time. PHP and Rust emitters and workers can
/// share the keys.
///
/// - `send` adds the message to its priority's set (`SADD`), or to the schedule (`ZADD`) when it
///   is due later; the driver also remembers the priority of a delayed message, so it returns
///   to its own set (a message scheduled by a PHP emitter lands in the default set, as in
///   Hermes).
/// - `receive` runs one script: due messages are promoted (atomically: a member moves only for
///   whoever removes it from the schedule), claims older than the visibility timeout are
///   returned, and up to [`RedisOptions::prefetch`] messages are taken, highest priority first.
///   Sets are not ordered: `SPOP` takes a random member, as in Hermes. A message taken before
///   its `execute_at` (put in a set directly) goes to the schedule instead.
/// - At-least-once (the default): a taken message moves into an in-flight sorted set until
///   `ack`; a worker killed mid-handler loses nothing. Every claim has a token of its own, so
///   `ack`, `nack` and `extend` of a claim that expired leave the message's next claim alone.
///   Messages claimed ahead (prefetched) are given back before half the visibility timeout
///   has passed, when no `receive` took them by then. [`DeliveryMode::AtMostOnce`] keeps
///   Hermes' plain `SPOP`.
/// - Dead letters: a message whose handler failed for good, or that cannot be decoded, is kept
///   beside its queue's set `<set>` in the sorted set `<set>_dead` (ids by time) and the hash
///   `<set>_dead_letters` (reason and body), within [`RedisOptions::retention`].
/// - Inspection: [`Driver::stats`] counts every state exactly (in flight only with claims, so
///   not in [`DeliveryMode::AtMostOnce`]; messages this process claimed ahead count as waiting),
///   in one script (its cost grows with
///   the claims and with the delayed messages of other priorities than the default); the
///   latency reads the due time of every waiting message of sets up to
///   [`LATENCY_SCAN_LIMIT`](crate::LATENCY_SCAN_LIMIT) members, and is unknown beyond. Peeks,
///   purges of each state and deletes by id read the set with `SSCAN`.
/// - Live workers: each running dispatcher's announcement is a field of the hash
///   `<key>_workers`, renewed while it runs and dropped by a listing once it expired.
///
/// Build it on the `redis` crate ([`RedisSetDriver::connect_redis`],
/// [`RedisSetDriver::from_redis`]) or on `fred` ([`RedisSetDriver::connect_fred`],
/// [`RedisSetDriver::from_fred`]); the keys and the behaviour are the same. Lost connections
/// are temporary errors: the client reconnects and the dispatcher waits for it. Clones are
/// cheap and share the connection, the priorities and the messages claimed ahead.
#[derive(Debug, Clone)]
pub struct RedisSetDriver {
    pub(crate) inner: Arc<Inner>,
}

/// What the clones of a driver share.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) client: Arc<dyn RedisClient>,
    pub(crate) options: RedisOptions,
    pub(crate) keys: Keys,
    pub(crate) serializer: Arc<dyn Serializer>,
    pub(crate) sets: PriorityQueues<Arc<str>>,
    /// Messages claimed ahead for this process.
    pub(crate) buffer: Mutex<VecDeque<Taken>>,
    /// One claim script at a time per process.
    pub(crate) fetching: tokio::sync::Mutex<()>,
    /// Claims acknowledged but not yet removed (deferred acknowledgements).
    pub(crate) acked: Mutex<Vec<Vec<u8>>>,
    /// Whether a task will remove the deferred acknowledgements after [`ACK_DELAY`](crate::ACK_DELAY).
    pub(crate) flush_scheduled: AtomicBool,
    /// Whether the task giving back buffered messages at the hold limit runs.
    pub(crate) sweeper: AtomicBool,
    /// Waking idle workers, and being woken.
    pub(crate) wakes: crate::wake::Wakes,
}

impl RedisSetDriver {
    /// A driver over any [`RedisClient`].
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for key names that are not letters, digits, `.`, `_`, `-`.
    pub fn new(client: impl RedisClient, options: RedisOptions) -> Result<Self, Error> {
        RedisSetDriver::from_client(Arc::new(client), options)
    }

    pub(crate) fn from_client(
        client: Arc<dyn RedisClient>,
        options: RedisOptions,
    ) -> Result<Self, Error> {
        let keys = Keys::new(&options)?;
        let sets = PriorityQueues::with(DEFAULT_PRIORITY, keys.default_set.as_str().into());
        Ok(RedisSetDriver::build(
            client,
            keys,
            options,
            Arc::new(JsonSerializer),
            sets,
            None,
        ))
    }

    /// The same driver, whose waiting workers block for wake-ups on connections `open` makes
    /// (one per driver, opened when a worker first waits).
    pub(crate) fn with_listener(self, open: OpenListener) -> Self {
        let inner = &self.inner;
        RedisSetDriver::build(
            inner.client.clone(),
            inner.keys.clone(),
            inner.options.clone(),
            inner.serializer.clone(),
            inner.sets.clone(),
            Some(open),
        )
    }

    fn build(
        client: Arc<dyn RedisClient>,
        keys: Keys,
        options: RedisOptions,
        serializer: Arc<dyn Serializer>,
        sets: PriorityQueues<Arc<str>>,
        open: Option<OpenListener>,
    ) -> Self {
        let open = open.filter(|_| options.wake_ups);
        RedisSetDriver {
            inner: Arc::new(Inner {
                client,
                keys,
                options,
                serializer,
                sets,
                buffer: Mutex::default(),
                fetching: tokio::sync::Mutex::new(()),
                acked: Mutex::default(),
                flush_scheduled: AtomicBool::new(false),
                sweeper: AtomicBool::new(false),
                wakes: crate::wake::Wakes::new(open),
            }),
        }
    }

    /// The same queues, on the same connection, with `serializer` instead of
    /// [`JsonSerializer`], as a new instance. A PHP process sharing the queue reads only
    /// Hermes' JSON.
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), hermes_core::Error> {
    /// use hermes_core::JsonSerializer;
    /// use hermes_redis::{RedisOptions, RedisSetDriver};
    ///
    /// let driver = RedisSetDriver::connect_redis("redis://127.0.0.1:6379", RedisOptions::default())
    ///     .await?
    ///     .with_serializer(JsonSerializer);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_serializer(self, serializer: impl Serializer) -> Self {
        RedisSetDriver::build(
            self.inner.client.clone(),
            self.inner.keys.clone(),
            self.inner.options.clone(),
            Arc::new(serializer),
            self.inner.sets.clone(),
            self.inner.wakes.opener(),
        )
    }

    /// Pokes the wake list for idle workers, unless wake-ups are off.
    pub(crate) fn wake_workers(&self) {
        if self.inner.options.wake_ups {
            crate::wake::poke(&self.inner);
        }
    }

    /// The client, to share with a [`RedisShutdown`](crate::RedisShutdown).
    pub fn client(&self) -> Arc<dyn RedisClient> {
        self.inner.client.clone()
    }

    /// The keys of the dead letters of the queue of `priority`: the sorted set of their ids,
    /// scored by the time they died, and the hash of their records.
    ///
    /// # Errors
    /// [`Error::UnknownPriority`] for a priority without a queue.
    pub fn dead_letter_keys(&self, priority: Priority) -> Result<(String, String), Error> {
        Ok(Keys::dead(&self.inner.sets.get(priority)?))
    }

    pub(crate) fn at_least_once(&self) -> bool {
        self.inner.options.delivery == DeliveryMode::AtLeastOnce
    }

    /// A message of `priorities` from the buffer alone.
    async fn take_buffered_one(&self, priorities: &[Priority]) -> Result<Option<Delivery>, Error> {
        while let Some(taken) = self.take_buffered(priorities) {
            if let Some(delivery) = self.deliver(taken).await? {
                return Ok(Some(delivery));
            }
        }
        Ok(None)
    }

    /// A message of `priorities` from the buffer, or from a claim; `None` when the sets have
    /// none now.
    async fn take_one(&self, priorities: &[Priority]) -> Result<Option<Delivery>, Error> {
        loop {
            if let Some(taken) = self.take_buffered(priorities) {
                match self.deliver(taken).await? {
                    Some(delivery) => return Ok(Some(delivery)),
                    None => continue,
                }
            }
            if self.fetch(priorities).await? == 0 {
                return Ok(None);
            }
        }
    }
}

#[async_trait]
impl Driver for RedisSetDriver {
    fn name(&self) -> &'static str {
        self.inner.client.name()
    }

    fn capabilities(&self) -> Capabilities {
        let mut capabilities = Capabilities::all();
        capabilities.fifo = false;
        capabilities.at_least_once = self.at_least_once();
        capabilities.extend = self.at_least_once();
        // Without claims, nothing tells how many messages are being handled.
        capabilities.exact_stats = self.at_least_once();
        capabilities
    }

    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        let key = self.inner.keys.set(name)?;
        self.inner.sets.insert(priority, key.into());
        Ok(())
    }

    async fn send_unique(
        &self,
        message: &Message,
        priority: Priority,
        unique: &hermes_core::Unique,
    ) -> Result<hermes_core::Emitted, Error> {
        self.send_unique_now(message, priority, unique).await
    }

    async fn release_unique(&self, key: &str, holder: &str) -> Result<(), Error> {
        self.release_unique_now(key, holder).await
    }

    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        message.check()?;
        let key = self.inner.sets.get(priority)?;
        let body = self.inner.serializer.serialize(message)?;
        match message.execute_at() {
            Some(at) if at > unix_now() => self.schedule(at, &body, priority, &[]).await?,
            _ => {
                self.inner
                    .client
                    .command("SADD", &[key.as_bytes(), &body])
                    .await?;
            }
        }
        self.wake_workers();
        Ok(())
    }

    /// One round trip for the whole batch: the messages due now go in one `SADD` of all of
    /// them, the delayed ones each in their schedule call, sent together on the connection
    /// (which pipelines them). Every message is checked and encoded before anything is sent.
    ///
    /// # Errors
    /// As [`send`](Driver::send); nothing is sent when a message is refused. On a connection
    /// error any of the messages may have been queued.
    async fn send_batch(&self, messages: &[Message], priority: Priority) -> Result<(), Error> {
        let key = self.inner.sets.get(priority)?;
        let now = unix_now();
        let mut due_now: Vec<Vec<u8>> = Vec::new();
        let mut later: Vec<(f64, Vec<u8>)> = Vec::new();
        for message in messages {
            message.check()?;
            let body = self.inner.serializer.serialize(message)?;
            match message.execute_at() {
                Some(at) if at > now => later.push((at, body)),
                _ => due_now.push(body),
            }
        }
        if messages.is_empty() {
            return Ok(());
        }
        let add = async {
            if due_now.is_empty() {
                return Ok(());
            }
            let mut args: Vec<&[u8]> = Vec::with_capacity(due_now.len() + 1);
            args.push(key.as_bytes());
            args.extend(due_now.iter().map(Vec::as_slice));
            self.inner.client.command("SADD", &args).await.map(drop)
        };
        let schedule = futures_util::future::try_join_all(
            later
                .iter()
                .map(|(at, body)| self.schedule(*at, body, priority, &[])),
        );
        futures_util::try_join!(add, schedule)?;
        self.wake_workers();
        Ok(())
    }

    async fn receive(
        &self,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        self.inner.sets.marked(priorities)?;
        if !self.inner.wakes.listens() {
            return poll(wait, self.inner.options.refresh_interval, || {
                self.take_one(priorities)
            })
            .await;
        }
        let give_up = tokio::time::Instant::now() + wait;
        let mut round = self.inner.wakes.round();
        loop {
            // A claim that found nothing, with no round since, needs no second one: the next
            // round comes with the next send, due message or refresh.
            let found = if self.inner.wakes.quiet() {
                self.take_buffered_one(priorities).await?
            } else {
                self.take_one(priorities).await?
            };
            if let Some(delivery) = found {
                return Ok(Some(delivery));
            }
            let now = tokio::time::Instant::now();
            if now >= give_up {
                return Ok(None);
            }
            let _waiting = crate::wake::wait_here(&self.inner);
            // The listener starts a round at least every refresh interval; should it stop
            // doing so, the receive still looks again.
            let fallback = self.inner.options.refresh_interval * 2;
            let _ = tokio::time::timeout((give_up - now).min(fallback), round.changed()).await;
        }
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        let RedisReceipt(taken) = delivery.receipt().downcast::<RedisReceipt>(self.name())?;
        if !taken.claimed {
            return Ok(());
        }
        if self.inner.options.deferred_acks {
            self.defer_acks(vec![taken.claim().to_vec()]);
            return Ok(());
        }
        self.inner
            .client
            .command(
                "ZREM",
                &[self.inner.keys.in_flight.as_bytes(), taken.claim()],
            )
            .await?;
        Ok(())
    }

    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        let RedisReceipt(taken) = delivery.receipt().downcast::<RedisReceipt>(self.name())?;
        self.give_back(taken).await?;
        self.wake_workers();
        Ok(())
    }

    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        let RedisReceipt(taken) = delivery.receipt().downcast::<RedisReceipt>(self.name())?;
        if !taken.claimed {
            return Ok(());
        }
        let by = by.as_secs_f64().to_string();
        let visibility = self
            .inner
            .options
            .visibility_timeout
            .as_secs_f64()
            .to_string();
        let reply = self
            .inner
            .client
            .eval(
                Script::Extend,
                &[&self.inner.keys.in_flight],
                &[taken.claim(), by.as_bytes(), visibility.as_bytes()],
            )
            .await?;
        if reply.as_int() == Some(1) {
            Ok(())
        } else {
            Err(Error::InvalidDelivery(
                "the claim expired before it was extended".to_owned(),
            ))
        }
    }

    async fn flush(&self) -> Result<(), Error> {
        let buffered: Vec<Taken> = self.buffer().drain(..).collect();
        let acked = self.remove_acked().await;
        self.give_back_all(&buffered).await.and(acked)
    }

    async fn stats(&self) -> Result<Vec<QueueStats>, Error> {
        self.stats_now().await
    }

    async fn peek(
        &self,
        priority: Priority,
        state: QueueState,
        limit: usize,
    ) -> Result<Vec<Message>, Error> {
        self.peek_now(priority, state, limit).await
    }

    async fn dead_letters(
        &self,
        priority: Priority,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, Error> {
        self.dead_letters_now(priority, limit).await
    }

    async fn dead_letter(&self, delivery: &Delivery, reason: &DeadReason) -> Result<(), Error> {
        self.dead_letter_now(delivery, reason).await
    }

    async fn replay(&self, priority: Priority, replay: &Replay) -> Result<u64, Error> {
        self.replay_now(priority, replay).await
    }

    async fn purge(&self, priority: Priority, state: QueueState) -> Result<Option<u64>, Error> {
        self.purge_now(priority, state).await
    }

    async fn delete(&self, priority: Priority, id: &str) -> Result<bool, Error> {
        self.delete_now(priority, id).await
    }

    async fn announce(&self, worker: &WorkerInfo, ttl: Duration) -> Result<(), Error> {
        let worker = worker.expiring_in(ttl);
        self.announce_now(&worker, ttl).await
    }

    async fn withdraw(&self, id: &str) -> Result<(), Error> {
        self.withdraw_now(id).await
    }

    async fn workers(&self) -> Result<Vec<WorkerInfo>, Error> {
        self.workers_now().await
    }
}
