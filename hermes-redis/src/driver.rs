//! The Redis driver: Hermes' sets and schedule, plus claims for at-least-once delivery.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use hermes_core::time::{poll, unix_now};
use hermes_core::{
    Capabilities, DEFAULT_PRIORITY, Delivery, Driver, Error, JsonSerializer, Message, Priority,
    PriorityQueues, Receipt, Serializer, async_trait,
};

use crate::client::{RedisClient, Reply};
use crate::naming::Keys;
use crate::scripts::Script;
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
/// - Undecodable members go to the list `<key>_quarantine` and are reported.
///
/// Build it on the `redis` crate ([`RedisSetDriver::connect_redis`],
/// [`RedisSetDriver::from_redis`]) or on `fred` ([`RedisSetDriver::connect_fred`],
/// [`RedisSetDriver::from_fred`]); the keys and the behaviour are the same. Lost connections
/// are temporary errors: the client reconnects and the dispatcher waits for it.
#[derive(Debug, Clone)]
pub struct RedisSetDriver {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    client: Arc<dyn RedisClient>,
    options: RedisOptions,
    keys: Keys,
    serializer: Arc<dyn Serializer>,
    sets: PriorityQueues<String>,
    /// Messages claimed ahead for this process.
    buffer: Mutex<VecDeque<Taken>>,
    /// One claim script at a time per process.
    fetching: tokio::sync::Mutex<()>,
    /// Claims acknowledged but not yet removed (deferred acknowledgements).
    acked: Mutex<Vec<Vec<u8>>>,
    /// Whether a task will remove the deferred acknowledgements after [`ACK_DELAY`].
    flush_scheduled: AtomicBool,
    /// Whether the task giving back buffered messages at the hold limit runs.
    sweeper: AtomicBool,
}

/// Clears [`Inner::sweeper`] when the sweeper task ends or is dropped.
struct SweeperRunning(Weak<Inner>);

impl Drop for SweeperRunning {
    fn drop(&mut self) {
        if let Some(inner) = self.0.upgrade() {
            inner.sweeper.store(false, Ordering::Release);
        }
    }
}

/// The longest a deferred acknowledgement waits for the next claim before it is sent alone.
pub const ACK_DELAY: Duration = Duration::from_millis(50);

/// A message taken from a set: its priority and the message as stored, and in at-least-once
/// mode its claim, the member `<priority>:<token>|<message>` of the in-flight set.
#[derive(Debug)]
struct Taken {
    priority: Priority,
    /// The claim member; in at-most-once mode, the message alone.
    member: Vec<u8>,
    /// Where the message starts in `member`.
    body_at: usize,
    claimed: bool,
    at: Instant,
}

impl Taken {
    /// A message taken as `member`: its claim (`<priority>:<token>|<message>`) when `claimed`,
    /// else the message itself.
    fn new(priority: Priority, member: Vec<u8>, claimed: bool, at: Instant) -> Self {
        let body_at = if claimed {
            member
                .iter()
                .position(|b| *b == b'|')
                .map_or(0, |bar| bar + 1)
        } else {
            0
        };
        Taken {
            priority,
            member,
            body_at,
            claimed,
            at,
        }
    }

    /// The message as stored.
    fn body(&self) -> &[u8] {
        &self.member[self.body_at..]
    }

    /// The claim member, or nothing when the message was taken without a claim.
    fn claim(&self) -> &[u8] {
        if self.claimed { &self.member } else { &[] }
    }
}

/// A delivered message: what was taken.
#[derive(Debug)]
struct RedisReceipt(Taken);

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
        let sets = PriorityQueues::with(DEFAULT_PRIORITY, keys.default_set.clone());
        Ok(RedisSetDriver::build(
            client,
            keys,
            options,
            Arc::new(JsonSerializer),
            sets,
        ))
    }

    fn build(
        client: Arc<dyn RedisClient>,
        keys: Keys,
        options: RedisOptions,
        serializer: Arc<dyn Serializer>,
        sets: PriorityQueues<String>,
    ) -> Self {
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
        )
    }

    /// The client, to share with a [`RedisShutdown`](crate::RedisShutdown).
    pub fn client(&self) -> Arc<dyn RedisClient> {
        self.inner.client.clone()
    }

    /// The list holding undecodable messages.
    pub fn quarantine_key(&self) -> &str {
        &self.inner.keys.quarantine
    }

    fn at_least_once(&self) -> bool {
        self.inner.options.delivery == DeliveryMode::AtLeastOnce
    }

    fn buffer(&self) -> std::sync::MutexGuard<'_, VecDeque<Taken>> {
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
    fn take_buffered(&self, priorities: &[Priority]) -> Option<Taken> {
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
    fn start_buffer_sweeper(&self) {
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

    /// Claims messages into the buffer; returns how many arrived. The claim runs in a task of
    /// its own, so a dropped `receive` loses nothing: what it claimed waits in the buffer.
    async fn fetch(&self, priorities: &[Priority]) -> Result<usize, Error> {
        let _one_at_a_time = self.inner.fetching.lock().await;
        let waiting = self
            .buffer()
            .iter()
            .filter(|c| priorities.is_empty() || priorities.contains(&c.priority))
            .count();
        if waiting > 0 {
            return Ok(waiting);
        }
        let driver = self.clone();
        let priorities = priorities.to_vec();
        hermes_core::task::detached(async move { driver.claim(&priorities).await }).await
    }

    async fn claim(&self, priorities: &[Priority]) -> Result<usize, Error> {
        let inner = &self.inner;
        let sets = self.inner.sets.marked(priorities)?;
        let (visibility, max) = if self.at_least_once() {
            (
                inner.options.visibility_timeout.as_secs_f64(),
                inner.options.prefetch.max(1),
            )
        } else {
            (0.0, 1)
        };
        let default_index = sets
            .iter()
            .position(|(p, _, _)| *p == DEFAULT_PRIORITY)
            .map_or(1, |i| i + 1);
        let mut keys: Vec<&str> = vec![
            &inner.keys.schedule,
            &inner.keys.schedule_index,
            &inner.keys.legacy_schedule_priorities,
            &inner.keys.in_flight,
        ];
        keys.extend(sets.iter().map(|(_, key, _)| key.as_str()));
        let mut args: Vec<String> = vec![
            unix_now().to_string(),
            visibility.to_string(),
            max.to_string(),
            sets.len().to_string(),
        ];
        args.extend(sets.iter().map(|(p, _, _)| p.to_string()));
        args.extend(
            sets.iter()
                .map(|(_, _, taken)| if *taken { "1" } else { "0" }.to_owned()),
        );
        args.push(default_index.to_string());
        args.push(format!("{:016x}", rand::random::<u64>()));
        let acked = self.take_acked();
        let mut args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        args.extend(acked.iter().map(Vec::as_slice));
        let reply = match inner.client.eval(Script::Claim, &keys, &args).await {
            Ok(reply) => reply,
            Err(e) => {
                self.defer_acks(acked);
                return Err(e);
            }
        };
        let Reply::Array(items) = reply else {
            return Ok(0);
        };
        let at_least_once = self.at_least_once();
        let now = Instant::now();
        let mut taken = Vec::with_capacity(items.len() / 2);
        let mut items = items.into_iter();
        while let (Some(priority), Some(member)) = (items.next(), items.next()) {
            let priority = priority
                .as_int()
                .and_then(|p| Priority::try_from(p).ok())
                .unwrap_or(DEFAULT_PRIORITY);
            let member = member.into_bytes().unwrap_or_default();
            taken.push(Taken::new(priority, member, at_least_once, now));
        }
        let count = taken.len();
        self.buffer().extend(taken);
        if at_least_once && count > 0 {
            self.start_buffer_sweeper();
        }
        Ok(count)
    }

    /// Decodes a taken message, or quarantines it. `Ok(None)` when it is not due yet: it was
    /// put in its set directly, ahead of its `execute_at`, and now waits in the schedule.
    async fn deliver(&self, taken: Taken) -> Result<Option<Delivery>, Error> {
        match self.inner.serializer.deserialize(taken.body()) {
            Ok(message) if !message.is_due_at(unix_now()) => {
                self.schedule(message.due(), taken.body(), taken.priority, taken.claim())
                    .await?;
                Ok(None)
            }
            Ok(message) => {
                // Handed out within the hold limit, so at least half the visibility timeout
                // of the claim is left.
                let lease = self
                    .inner
                    .options
                    .visibility_timeout
                    .saturating_sub(taken.at.elapsed());
                let claimed = taken.claimed;
                let delivery =
                    Delivery::new(message, taken.priority, Receipt::new(RedisReceipt(taken)));
                Ok(Some(if claimed {
                    delivery.with_lease(lease)
                } else {
                    delivery
                }))
            }
            Err(source) => {
                let keys = [
                    self.inner.keys.quarantine.as_str(),
                    &self.inner.keys.in_flight,
                ];
                self.inner
                    .client
                    .eval(Script::Quarantine, &keys, &[taken.body(), taken.claim()])
                    .await?;
                Err(Error::Undecodable {
                    quarantine: format!("the Redis list {}", self.inner.keys.quarantine),
                    source,
                })
            }
        }
    }

    /// Puts `body` in the schedule, due at `due`, remembering `priority`; for a claimed
    /// message, only while `claim` (non-empty) lasts, which it ends.
    async fn schedule(
        &self,
        due: f64,
        body: &[u8],
        priority: Priority,
        claim: &[u8],
    ) -> Result<(), Error> {
        let keys = [
            self.inner.keys.schedule.as_str(),
            &self.inner.keys.schedule_index,
            &self.inner.keys.in_flight,
        ];
        let priority = if priority == DEFAULT_PRIORITY {
            String::new()
        } else {
            priority.to_string()
        };
        let due = due.to_string();
        let now = unix_now().to_string();
        self.inner
            .client
            .eval(
                Script::Schedule,
                &keys,
                &[
                    due.as_bytes(),
                    body,
                    priority.as_bytes(),
                    now.as_bytes(),
                    claim,
                ],
            )
            .await?;
        Ok(())
    }

    fn take_acked(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut *self.inner.acked.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Queues claims for removal with the next claim call, making sure a task removes them
    /// after [`ACK_DELAY`] if no claim comes first.
    fn defer_acks(&self, claims: Vec<Vec<u8>>) {
        if claims.is_empty() {
            return;
        }
        self.inner
            .acked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(claims);
        if !self.inner.flush_scheduled.swap(true, Ordering::AcqRel) {
            let driver = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(ACK_DELAY).await;
                driver.inner.flush_scheduled.store(false, Ordering::Release);
                if let Err(e) = driver.remove_acked().await {
                    tracing::warn!("Removing acknowledged claims failed, retrying later - {e}");
                }
            });
        }
    }

    /// Removes the deferred acknowledgements now.
    async fn remove_acked(&self) -> Result<(), Error> {
        let acked = self.take_acked();
        if acked.is_empty() {
            return Ok(());
        }
        let mut args: Vec<&[u8]> = vec![self.inner.keys.in_flight.as_bytes()];
        args.extend(acked.iter().map(Vec::as_slice));
        if let Err(e) = self.inner.client.command("ZREM", &args).await {
            self.defer_acks(acked);
            return Err(e);
        }
        Ok(())
    }

    /// The set of `priority`, or the default set when it has none any more.
    fn set_of(&self, priority: Priority) -> String {
        self.inner
            .sets
            .get_or(priority, DEFAULT_PRIORITY)
            .unwrap_or_else(|| self.inner.keys.default_set.clone())
    }

    /// Gives back every one of `taken`; the first error, if any, after trying all.
    async fn give_back_all(&self, taken: &[Taken]) -> Result<(), Error> {
        let mut result = Ok(());
        for t in taken {
            if let Err(e) = self.give_back(t).await {
                result = result.and(Err(e));
            }
        }
        result
    }

    /// Puts a message back in its set; a claimed one only while its claim lasts.
    async fn give_back(&self, taken: &Taken) -> Result<(), Error> {
        let set = self.set_of(taken.priority);
        if taken.claimed {
            let keys = [self.inner.keys.in_flight.as_str(), &set];
            self.inner
                .client
                .eval(Script::Nack, &keys, &[taken.claim()])
                .await?;
        } else {
            self.inner
                .client
                .command("SADD", &[set.as_bytes(), taken.body()])
                .await?;
        }
        Ok(())
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
        capabilities
    }

    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        let key = self.inner.keys.set(name)?;
        self.inner.sets.insert(priority, key);
        Ok(())
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
        Ok(())
    }

    async fn receive(
        &self,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        self.inner.sets.marked(priorities)?;
        poll(wait, self.inner.options.refresh_interval, || async {
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
        })
        .await
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
        self.give_back(taken).await
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
}
