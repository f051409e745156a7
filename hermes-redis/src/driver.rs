//! The Redis driver: Hermes' sets and schedule, plus claims for at-least-once delivery.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_core::time::{poll, unix_now};
use hermes_core::{
    Capabilities, DEFAULT_PRIORITY, Delivery, Driver, Error, JsonSerializer, Message, Priority,
    PriorityQueues, Receipt, Serializer, async_trait,
};

use crate::client::{RedisClient, Reply};
use crate::keys::Keys;
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
///   Sets are not ordered: `SPOP` takes a random member, as in Hermes.
/// - At-least-once (the default): a taken message moves into an in-flight sorted set until
///   `ack`; a worker killed mid-handler loses nothing. [`DeliveryMode::AtMostOnce`] keeps
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
    buffer: Mutex<VecDeque<Claimed>>,
    /// One claim script at a time per process.
    fetching: tokio::sync::Mutex<()>,
    /// Claims acknowledged but not yet removed (deferred acknowledgements).
    acked: Mutex<Vec<Vec<u8>>>,
    /// Whether a task will remove the deferred acknowledgements after [`ACK_DELAY`].
    flush_scheduled: AtomicBool,
}

/// The longest a deferred acknowledgement waits for the next claim before it is sent alone.
pub const ACK_DELAY: Duration = Duration::from_millis(50);

#[derive(Debug)]
struct Claimed {
    priority: Priority,
    body: Vec<u8>,
    at: Instant,
}

/// A delivered message: its priority and the message as stored. In at-least-once mode, its
/// claim is the member `<priority>|<message>` of the in-flight set.
#[derive(Debug)]
struct RedisReceipt {
    priority: Priority,
    body: Vec<u8>,
    claimed: bool,
}

impl RedisReceipt {
    fn claim(&self) -> Vec<u8> {
        claim_of(self.priority, &self.body)
    }
}

/// The in-flight member of a claimed message.
fn claim_of(priority: Priority, body: &[u8]) -> Vec<u8> {
    let mut claim = format!("{priority}|").into_bytes();
    claim.extend_from_slice(body);
    claim
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
        let sets = PriorityQueues::with(DEFAULT_PRIORITY, keys.default_set.clone());
        Ok(RedisSetDriver {
            inner: Arc::new(Inner {
                client,
                keys,
                options,
                serializer: Arc::new(JsonSerializer),
                sets,
                buffer: Mutex::default(),
                fetching: tokio::sync::Mutex::new(()),
                acked: Mutex::default(),
                flush_scheduled: AtomicBool::new(false),
            }),
        })
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

    fn buffer(&self) -> std::sync::MutexGuard<'_, VecDeque<Claimed>> {
        self.inner.buffer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the first buffered message of `priorities`. Messages held for more than half the
    /// visibility timeout are given back instead: their claim may run out before a handler ends.
    fn take_buffered(&self, priorities: &[Priority]) -> Option<Claimed> {
        let limit = self.inner.options.visibility_timeout / 2;
        let mut buffer = self.buffer();
        let (stale, fresh): (Vec<_>, Vec<_>) =
            buffer.drain(..).partition(|c| c.at.elapsed() > limit);
        buffer.extend(fresh);
        let index = buffer
            .iter()
            .position(|c| priorities.is_empty() || priorities.contains(&c.priority));
        let taken = index.and_then(|i| buffer.remove(i));
        drop(buffer);
        for claimed in stale {
            let driver = self.clone();
            tokio::spawn(async move {
                let _ = driver.return_claimed(claimed).await;
            });
        }
        taken
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
        tokio::spawn(async move { driver.claim(&priorities).await })
            .await
            .map_err(|e| {
                Error::driver(self.inner.client.name(), format!("claim task: {e}"), true)
            })?
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
            &inner.keys.schedule_priorities,
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
        let now = Instant::now();
        let mut claimed = Vec::with_capacity(items.len() / 2);
        let mut items = items.into_iter();
        while let (Some(priority), Some(body)) = (items.next(), items.next()) {
            let priority = priority
                .as_int()
                .and_then(|p| Priority::try_from(p).ok())
                .unwrap_or(DEFAULT_PRIORITY);
            claimed.push(Claimed {
                priority,
                body: body.into_bytes().unwrap_or_default(),
                at: now,
            });
        }
        let count = claimed.len();
        self.buffer().extend(claimed);
        Ok(count)
    }

    /// Decodes a claimed message, or quarantines it.
    async fn deliver(&self, claimed: Claimed) -> Result<Delivery, Error> {
        let receipt = RedisReceipt {
            priority: claimed.priority,
            body: claimed.body,
            claimed: self.at_least_once(),
        };
        match self.inner.serializer.deserialize(&receipt.body) {
            Ok(message) => {
                let at_least_once = receipt.claimed;
                let delivery = Delivery::new(message, receipt.priority, Receipt::new(receipt));
                // A prefetched claim is handed out within half the visibility timeout, so at
                // least that much of it is left.
                Ok(if at_least_once {
                    delivery.with_lease(self.inner.options.visibility_timeout / 2)
                } else {
                    delivery
                })
            }
            Err(source) => {
                let keys = [
                    self.inner.keys.quarantine.as_str(),
                    &self.inner.keys.in_flight,
                ];
                let claim = if receipt.claimed {
                    receipt.claim()
                } else {
                    Vec::new()
                };
                self.inner
                    .client
                    .eval(Script::Quarantine, &keys, &[&receipt.body, &claim])
                    .await?;
                Err(Error::Undecodable {
                    quarantine: format!("the Redis list {}", self.inner.keys.quarantine),
                    source,
                })
            }
        }
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

    /// Returns a message claimed ahead but not handed out to its set.
    async fn return_claimed(&self, claimed: Claimed) -> Result<(), Error> {
        self.give_back(claimed.priority, &claimed.body, self.at_least_once())
            .await
    }

    /// The set of `priority`, or the default set when it has none any more.
    fn set_of(&self, priority: Priority) -> String {
        self.inner
            .sets
            .get_or(priority, DEFAULT_PRIORITY)
            .unwrap_or_else(|| self.inner.keys.default_set.clone())
    }

    /// Puts a message back in its set; a claimed one only while its claim lasts.
    async fn give_back(&self, priority: Priority, body: &[u8], claimed: bool) -> Result<(), Error> {
        let set = self.set_of(priority);
        if claimed {
            let keys = [self.inner.keys.in_flight.as_str(), &set];
            self.inner
                .client
                .eval(Script::Nack, &keys, &[&claim_of(priority, body)])
                .await?;
        } else {
            self.inner
                .client
                .command("SADD", &[set.as_bytes(), body])
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
            Some(at) if at > unix_now() => {
                let keys = [
                    self.inner.keys.schedule.as_str(),
                    &self.inner.keys.schedule_priorities,
                ];
                let priority = if priority == DEFAULT_PRIORITY {
                    String::new()
                } else {
                    priority.to_string()
                };
                let at = at.to_string();
                self.inner
                    .client
                    .eval(
                        Script::Schedule,
                        &keys,
                        &[at.as_bytes(), &body, priority.as_bytes()],
                    )
                    .await?;
            }
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
                if let Some(claimed) = self.take_buffered(priorities) {
                    return self.deliver(claimed).await.map(Some);
                }
                if self.fetch(priorities).await? == 0 {
                    return Ok(None);
                }
            }
        })
        .await
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        let receipt = delivery.receipt().expect::<RedisReceipt>(self.name())?;
        if !receipt.claimed {
            return Ok(());
        }
        if self.inner.options.deferred_acks {
            self.defer_acks(vec![receipt.claim()]);
            return Ok(());
        }
        self.inner
            .client
            .command(
                "ZREM",
                &[self.inner.keys.in_flight.as_bytes(), &receipt.claim()],
            )
            .await?;
        Ok(())
    }

    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        let receipt = delivery.receipt().expect::<RedisReceipt>(self.name())?;
        self.give_back(receipt.priority, &receipt.body, receipt.claimed)
            .await
    }

    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        let receipt = delivery.receipt().expect::<RedisReceipt>(self.name())?;
        if !receipt.claimed {
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
                &[&receipt.claim(), by.as_bytes(), visibility.as_bytes()],
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
        let claimed: Vec<Claimed> = self.buffer().drain(..).collect();
        let mut result = self.remove_acked().await;
        for c in claimed {
            if let Err(e) = self.return_claimed(c).await {
                result = result.and(Err(e));
            }
        }
        result
    }
}
