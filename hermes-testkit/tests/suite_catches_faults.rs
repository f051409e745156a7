//! The suite fails drivers that break the contract: each faulty wrapper of the memory driver
//! must make the scenario aimed at its fault fail.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use hermes_core::driver::{
    Browse, Capabilities, Controls, Counters, DeadLetters, Delivery, Inspect, JobStore, LimitStore,
    MemoryStore, UniqueEmits, Workers, forward,
};
use hermes_core::flow::{Admission, Bound, Cancellation, PauseTarget};
use hermes_core::inspect::{
    DeadLetter, DeadReason, Figure, Page, PageRequest, QueueState, QueueStats, Replay,
};
use hermes_core::tracking::{
    GroupPage, GroupRequest, GroupSpec, GroupState, JobRecord, JobState, RecordPage, RecordRequest,
    Settled, Tally,
};
use hermes_core::workers::WorkerInfo;
use hermes_core::{
    DEFAULT_PRIORITY, DecodeError, Driver, Emitted, Error, JsonSerializer, Message, Priority,
    Serializer, Unique, async_trait,
};
use hermes_testkit::suite::{self, Harness, scenarios};
use hermes_testkit::{MemoryDriver, MemoryHarness};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// Each add counts one less than asked.
    CountersLoseOne,
    /// Each page but the last leaves out its last message.
    PageSkips,
    /// Each page of job records but the last leaves out its last record.
    RecordPagesSkip,
    /// Each page of groups but the last leaves out its last group.
    GroupPagesSkip,
    /// Everything goes to the default queue.
    IgnoresPriority,
    /// `ack` keeps the message claimed, so it comes back.
    AckDoesNothing,
    /// Delayed messages are delivered at once.
    IgnoresDelay,
    /// `receive` acknowledges before returning (at-most-once while declaring at-least-once).
    AcksOnReceive,
    /// `receive` serves the lowest priority first.
    LowestFirst,
    /// `send_batch` leaves out the last message of a batch.
    BatchLosesOne,
    /// `send` puts the message on the queue twice.
    SendsTwice,
    /// Messages are written with `/` unescaped: JSON a decoder reads as the same message, but
    /// not the bytes PHP Hermes writes.
    UnescapedSlashes,
    /// `stats` counts claimed messages as waiting.
    MiscountsInFlight,
    /// `peek` claims what it lists.
    PeekClaims,
    /// `purge` of the waiting messages takes the delayed ones too.
    PurgesEverything,
    /// `dead_letter` only acknowledges: the message is lost.
    DropsDeadLetters,
    /// `replay` keeps the retry count.
    ReplayKeepsRetries,
    /// `workers` lists announcements past their time to live.
    WorkersNeverExpire,
    /// Each instance keeps its own uniqueness keys, as if in its process's memory: emits from
    /// two processes both get in.
    KeysPerProcess,
    /// `release_unique` does nothing: the key stays held after the ack.
    KeyNeverReleased,
    /// `send_unique` holds keys for a day, whatever the window.
    KeyNeverExpires,
    /// Each instance keeps its own limit slots and starts, as if in its process's memory.
    LimitsPerProcess,
    /// Slots are taken for a day, whatever the lease.
    SlotsNeverExpire,
    /// `admit_starts` says it recorded every start asked for, whatever it recorded.
    StartsAheadMiscounted,
    /// Each instance keeps its own pauses and cancellations.
    ControlsPerProcess,
    /// Each instance keeps its own job records and groups.
    JobsPerProcess,
    /// Records are kept without their results.
    DropsResults,
    /// A record of a running job is not kept.
    HidesRunning,
    /// `settle` counts a member each time it is settled.
    SettlesTwice,
    /// `release` queues its message each time it is called.
    ReleasesTwice,
    /// `claim_run` gives the run to every copy that asks.
    ClaimsEveryCopy,
    /// `settle` keeps a member's outcome without its result.
    DropsStepResults,
}

/// Hermes' JSON with `/` left unescaped.
#[derive(Debug)]
struct UnescapedSlashes;

impl Serializer for UnescapedSlashes {
    fn serialize(&self, message: &Message) -> Result<Vec<u8>, Error> {
        let json = String::from_utf8(JsonSerializer.serialize(message)?).expect("JSON is text");
        Ok(json.replace("\\/", "/").into_bytes())
    }
    fn deserialize(&self, bytes: &[u8]) -> Result<Message, DecodeError> {
        JsonSerializer.deserialize(bytes)
    }
}

#[derive(Debug)]
struct Faulty {
    inner: MemoryDriver,
    fault: Fault,
    local_keys: std::sync::Mutex<std::collections::HashSet<String>>,
    local_flow: MemoryStore,
    local_jobs: MemoryDriver,
}

impl Faulty {
    /// Where this instance keeps records and groups.
    fn job_store(&self) -> &dyn JobStore {
        match self.fault {
            Fault::JobsPerProcess => &self.local_jobs,
            _ => &self.inner,
        }
    }

    /// Where this instance keeps its limits.
    fn limit_store(&self) -> &dyn LimitStore {
        match self.fault {
            Fault::LimitsPerProcess => &self.local_flow,
            _ => self.inner.limits().unwrap(),
        }
    }

    /// Where this instance keeps its pauses and cancellations.
    fn control_store(&self) -> &dyn Controls {
        match self.fault {
            Fault::ControlsPerProcess => &self.local_flow,
            _ => self.inner.controls().unwrap(),
        }
    }
}

#[async_trait]
#[warn(clippy::missing_trait_methods)]
impl Driver for Faulty {
    fn name(&self) -> &'static str {
        "faulty"
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        self.inner.setup_priority_queue(name, priority)
    }
    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        match self.fault {
            Fault::IgnoresPriority if self.inner.queue_name(priority).is_some() => {
                self.inner.send(message, DEFAULT_PRIORITY).await
            }
            Fault::IgnoresDelay if message.execute_at().is_some() => {
                let now = Message::builder(message.message_type())
                    .id(message.id())
                    .created(message.created())
                    .retries(message.retries())
                    .build()?;
                self.inner.send(&now, priority).await
            }
            Fault::SendsTwice => {
                self.inner.send(message, priority).await?;
                self.inner.send(message, priority).await
            }
            _ => self.inner.send(message, priority).await,
        }
    }
    async fn send_batch(&self, messages: &[Message], priority: Priority) -> Result<(), Error> {
        let messages = match (self.fault, messages.split_last()) {
            (Fault::BatchLosesOne, Some((_, rest))) => rest,
            _ => messages,
        };
        for message in messages {
            self.send(message, priority).await?;
        }
        Ok(())
    }
    async fn receive(&self, p: &[Priority], wait: Duration) -> Result<Option<Delivery>, Error> {
        if self.fault == Fault::LowestFirst && p.is_empty() {
            for priority in [50, DEFAULT_PRIORITY, 200] {
                if self.inner.queue_name(priority).is_some()
                    && let Some(d) = self.inner.receive(&[priority], Duration::ZERO).await?
                {
                    return Ok(Some(d));
                }
            }
        }
        let delivery = self.inner.receive(p, wait).await?;
        if self.fault == Fault::AcksOnReceive
            && let Some(d) = &delivery
        {
            self.inner.ack(d).await?;
        }
        Ok(delivery)
    }
    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        if self.fault == Fault::AckDoesNothing {
            return Ok(());
        }
        self.inner.ack(delivery).await
    }
    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.inner.nack(delivery).await
    }
    forward!(inner => extend, flush);
    fn inspect(&self) -> Option<&dyn Inspect> {
        Some(self)
    }
    fn browse(&self) -> Option<&dyn Browse> {
        Some(self)
    }
    fn dead_letters(&self) -> Option<&dyn DeadLetters> {
        Some(self)
    }
    fn workers(&self) -> Option<&dyn Workers> {
        Some(self)
    }
    fn unique(&self) -> Option<&dyn UniqueEmits> {
        Some(self)
    }
    fn limits(&self) -> Option<&dyn LimitStore> {
        Some(self)
    }
    fn counters(&self) -> Option<&dyn Counters> {
        Some(self)
    }
    fn controls(&self) -> Option<&dyn Controls> {
        Some(self)
    }
    fn jobs(&self) -> Option<&dyn JobStore> {
        Some(self)
    }
}

#[async_trait]
impl JobStore for Faulty {
    async fn put(&self, record: &JobRecord, keep: Duration) -> Result<(), Error> {
        match self.fault {
            Fault::HidesRunning if record.state == JobState::Running => Ok(()),
            Fault::DropsResults => {
                let mut record = record.clone();
                record.result = None;
                self.job_store().put(&record, keep).await
            }
            _ => self.job_store().put(record, keep).await,
        }
    }
    async fn get(&self, id: &str) -> Result<Option<JobRecord>, Error> {
        self.job_store().get(id).await
    }
    async fn groups(&self, request: &GroupRequest) -> Result<GroupPage, Error> {
        let mut page = self.job_store().groups(request).await?;
        if self.fault == Fault::GroupPagesSkip && page.next.is_some() {
            page.groups.pop();
        }
        Ok(page)
    }
    async fn records(&self, request: &RecordRequest) -> Result<RecordPage, Error> {
        let mut page = self.job_store().records(request).await?;
        if self.fault == Fault::RecordPagesSkip && page.next.is_some() {
            page.records.pop();
        }
        Ok(page)
    }
    async fn open(
        &self,
        spec: &GroupSpec,
        members: &[String],
        keep: Duration,
    ) -> Result<(), Error> {
        self.job_store().open(spec, members, keep).await
    }
    async fn join(&self, group: &str, members: &[String]) -> Result<(), Error> {
        self.job_store().join(group, members).await
    }
    async fn settle(
        &self,
        group: &str,
        member: &str,
        outcome: &Settled,
        record: Option<(&JobRecord, Duration)>,
    ) -> Result<Option<(Tally, bool)>, Error> {
        let mut record = record.map(|(r, keep)| (r.clone(), keep));
        if self.fault == Fault::DropsResults
            && let Some((record, _)) = &mut record
        {
            record.result = None;
        }
        let record = record.as_ref().map(|(r, keep)| (r, *keep));
        let outcome = match (self.fault, outcome) {
            (Fault::DropsStepResults, Settled::Succeeded { .. }) => {
                &Settled::Succeeded { result: None }
            }
            _ => outcome,
        };
        let store = self.job_store();
        let settled = store.settle(group, member, outcome, record).await?;
        if self.fault != Fault::SettlesTwice {
            return Ok(settled);
        }
        // Counted again under a name of its own: the member counts twice.
        store.join(group, &[format!("{member}~again")]).await.ok();
        store
            .settle(group, &format!("{member}~again"), outcome, None)
            .await
    }
    async fn release(
        &self,
        group: &str,
        name: &str,
        message: &Message,
        priority: Priority,
    ) -> Result<bool, Error> {
        if self.fault == Fault::ReleasesTwice {
            self.inner.send(message, priority).await?;
            return Ok(true);
        }
        self.job_store()
            .release(group, name, message, priority)
            .await
    }
    async fn mark(&self, group: &str, name: &str, released: bool) -> Result<bool, Error> {
        self.job_store().mark(group, name, released).await
    }
    async fn claim_run(&self, group: &str, name: &str, copy: &str) -> Result<bool, Error> {
        let claimed = self.job_store().claim_run(group, name, copy).await?;
        Ok(claimed || self.fault == Fault::ClaimsEveryCopy)
    }
    async fn group(&self, group: &str) -> Result<Option<GroupState>, Error> {
        self.job_store().group(group).await
    }
    async fn outcomes(
        &self,
        group: &str,
        members: &[String],
    ) -> Result<Vec<Option<Settled>>, Error> {
        self.job_store().outcomes(group, members).await
    }
}

#[async_trait]
impl LimitStore for Faulty {
    async fn admit(
        &self,
        holder: &str,
        bounds: &[Bound],
        lease: Duration,
    ) -> Result<Admission, Error> {
        let lease = if self.fault == Fault::SlotsNeverExpire {
            Duration::from_secs(86_400)
        } else {
            lease
        };
        self.limit_store().admit(holder, bounds, lease).await
    }
    async fn admit_starts(
        &self,
        holder: &str,
        bounds: &[Bound],
        want: u32,
        within: Duration,
    ) -> Result<(Admission, u32), Error> {
        let (admission, recorded) = self
            .limit_store()
            .admit_starts(holder, bounds, want, within)
            .await?;
        if self.fault == Fault::StartsAheadMiscounted && admission == Admission::Admitted {
            return Ok((admission, want));
        }
        Ok((admission, recorded))
    }
    async fn renew(&self, holder: &str, names: &[String], lease: Duration) -> Result<bool, Error> {
        self.limit_store().renew(holder, names, lease).await
    }
    async fn release(&self, holder: &str, names: &[String]) -> Result<(), Error> {
        self.limit_store().release(holder, names).await
    }
    async fn usage(&self, bound: &Bound) -> Result<u32, Error> {
        self.limit_store().usage(bound).await
    }
}

#[async_trait]
impl Controls for Faulty {
    async fn pause(&self, target: &PauseTarget) -> Result<(), Error> {
        self.control_store().pause(target).await
    }
    async fn resume(&self, target: &PauseTarget) -> Result<bool, Error> {
        self.control_store().resume(target).await
    }
    async fn paused(&self) -> Result<Vec<PauseTarget>, Error> {
        self.control_store().paused().await
    }
    async fn cancel(&self, cancellation: &Cancellation) -> Result<(), Error> {
        self.control_store().cancel(cancellation).await
    }
    async fn cancellations(&self, since: f64) -> Result<Vec<Cancellation>, Error> {
        self.control_store().cancellations(since).await
    }
}

#[async_trait]
impl Inspect for Faulty {
    async fn stats(&self) -> Result<Vec<QueueStats>, Error> {
        let mut stats = self.inner.inspect().unwrap().stats().await?;
        if self.fault == Fault::MiscountsInFlight {
            for queue in &mut stats {
                let moved = queue.in_flight.value().unwrap_or(0);
                queue.waiting = Figure::Exact(queue.waiting.value().unwrap_or(0) + moved);
                queue.in_flight = Figure::Exact(0);
            }
        }
        Ok(stats)
    }
    async fn purge(&self, p: Priority, state: QueueState) -> Result<Option<u64>, Error> {
        if self.fault == Fault::PurgesEverything {
            self.inner
                .inspect()
                .unwrap()
                .purge(p, QueueState::Delayed)
                .await?;
        }
        self.inner.inspect().unwrap().purge(p, state).await
    }
}

#[async_trait]
impl Counters for Faulty {
    async fn add(
        &self,
        bucket: &str,
        counts: &[(String, u64)],
        keep: Duration,
    ) -> Result<(), Error> {
        let counts: Vec<(String, u64)> = counts
            .iter()
            .map(|(name, n)| {
                let n = if self.fault == Fault::CountersLoseOne {
                    n.saturating_sub(1)
                } else {
                    *n
                };
                (name.clone(), n)
            })
            .collect();
        self.inner
            .counters()
            .unwrap()
            .add(bucket, &counts, keep)
            .await
    }
    async fn read(&self, buckets: &[String]) -> Result<Vec<(String, Vec<(String, u64)>)>, Error> {
        self.inner.counters().unwrap().read(buckets).await
    }
}

#[async_trait]
impl Browse for Faulty {
    async fn peek(
        &self,
        p: Priority,
        state: QueueState,
        limit: usize,
    ) -> Result<Vec<Message>, Error> {
        if self.fault == Fault::PeekClaims && state == QueueState::Waiting {
            let mut taken = Vec::new();
            while taken.len() < limit {
                match self.inner.receive(&[p], Duration::ZERO).await? {
                    Some(d) => taken.push(d.message().clone()),
                    None => break,
                }
            }
            return Ok(taken);
        }
        self.inner.browse().unwrap().peek(p, state, limit).await
    }
    async fn page(&self, p: Priority, request: &PageRequest) -> Result<Page, Error> {
        let mut page = self.inner.browse().unwrap().page(p, request).await?;
        if self.fault == Fault::PageSkips && page.next.is_some() {
            page.messages.pop();
        }
        Ok(page)
    }
    async fn delete(&self, p: Priority, id: &str) -> Result<bool, Error> {
        self.inner.browse().unwrap().delete(p, id).await
    }
}

#[async_trait]
impl DeadLetters for Faulty {
    async fn add(&self, delivery: &Delivery, reason: &DeadReason) -> Result<(), Error> {
        if self.fault == Fault::DropsDeadLetters {
            return self.inner.ack(delivery).await;
        }
        self.inner
            .dead_letters()
            .unwrap()
            .add(delivery, reason)
            .await
    }
    async fn list(&self, p: Priority, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        self.inner.dead_letters().unwrap().list(p, limit).await
    }
    async fn replay(&self, p: Priority, replay: &Replay) -> Result<u64, Error> {
        if self.fault == Fault::ReplayKeepsRetries {
            return self
                .inner
                .dead_letters()
                .unwrap()
                .replay(p, &replay.clone().keeping_retries())
                .await;
        }
        self.inner.dead_letters().unwrap().replay(p, replay).await
    }
}

#[async_trait]
impl Workers for Faulty {
    async fn announce(&self, worker: &WorkerInfo, ttl: Duration) -> Result<(), Error> {
        let ttl = if self.fault == Fault::WorkersNeverExpire {
            Duration::from_secs(3600)
        } else {
            ttl
        };
        self.inner.workers().unwrap().announce(worker, ttl).await
    }
    async fn withdraw(&self, id: &str) -> Result<(), Error> {
        self.inner.workers().unwrap().withdraw(id).await
    }
    async fn list(&self) -> Result<Vec<WorkerInfo>, Error> {
        self.inner.workers().unwrap().list().await
    }
}

#[async_trait]
impl UniqueEmits for Faulty {
    async fn send_unique(
        &self,
        message: &Message,
        priority: Priority,
        unique: &Unique,
    ) -> Result<Emitted, Error> {
        match self.fault {
            Fault::KeysPerProcess => {
                if !self
                    .local_keys
                    .lock()
                    .unwrap()
                    .insert(unique.key().to_owned())
                {
                    return Ok(Emitted::Duplicate);
                }
                self.inner.send(message, priority).await?;
                Ok(Emitted::Queued)
            }
            Fault::KeyNeverExpires => {
                let unique = unique.clone().hold_for(Duration::from_secs(86_400));
                self.inner
                    .unique()
                    .unwrap()
                    .send_unique(message, priority, &unique)
                    .await
            }
            _ => {
                self.inner
                    .unique()
                    .unwrap()
                    .send_unique(message, priority, unique)
                    .await
            }
        }
    }
    async fn release(&self, key: &str, holder: &str) -> Result<(), Error> {
        if self.fault == Fault::KeyNeverReleased {
            return Ok(());
        }
        self.inner.unique().unwrap().release(key, holder).await
    }
}

struct FaultyHarness(MemoryHarness, Fault);

#[async_trait]
impl Harness for FaultyHarness {
    type Driver = Faulty;
    async fn open(&self, queue: &str) -> Result<Faulty, Error> {
        let inner = self.0.open(queue).await?;
        Ok(Faulty {
            inner: match self.1 {
                Fault::UnescapedSlashes => inner.with_serializer(UnescapedSlashes),
                _ => inner,
            },
            fault: self.1,
            local_keys: std::sync::Mutex::default(),
            local_flow: MemoryStore::new(),
            local_jobs: MemoryDriver::new(),
        })
    }
    async fn push_raw(&self, queue: &str, bytes: &[u8]) -> Result<(), Error> {
        self.0.push_raw(queue, bytes).await
    }
    async fn pull_raw(&self, queue: &str) -> Result<Option<Vec<u8>>, Error> {
        self.0.pull_raw(queue).await
    }
    async fn quarantined(&self, queue: &str) -> Result<usize, Error> {
        self.0.quarantined(queue).await
    }
    fn visibility_timeout(&self) -> Duration {
        self.0.visibility_timeout()
    }
}

macro_rules! must_fail {
    ($test:ident, $fault:expr, $scenario:ident) => {
        #[test]
        fn $test() {
            let result = catch_unwind(AssertUnwindSafe(|| {
                suite::run(
                    || FaultyHarness(MemoryHarness::new(), $fault),
                    stringify!($scenario),
                    |h, q| async move { scenarios::$scenario(&*h, &q).await },
                )
            }));
            assert!(
                result.is_err(),
                "{:?} passed {}",
                $fault,
                stringify!($scenario)
            );
        }
    };
}

must_fail!(
    ignoring_priority_fails,
    Fault::IgnoresPriority,
    highest_priority_first
);
must_fail!(
    ignoring_priority_fails_the_filter,
    Fault::IgnoresPriority,
    priority_filter
);
must_fail!(
    lowest_first_fails,
    Fault::LowestFirst,
    highest_priority_first
);
must_fail!(
    ignored_ack_fails,
    Fault::AckDoesNothing,
    ack_removes_for_good
);
must_fail!(
    ignored_delay_fails,
    Fault::IgnoresDelay,
    delayed_message_waits_until_due
);
must_fail!(
    ignored_delay_fails_retries,
    Fault::IgnoresDelay,
    failing_handler_sends_one_delayed_copy
);
must_fail!(
    ignoring_priority_fails_batches,
    Fault::IgnoresPriority,
    send_batch_delivers_each
);
must_fail!(
    ignored_delay_fails_batches,
    Fault::IgnoresDelay,
    send_batch_delivers_each
);
must_fail!(
    a_lost_batch_message_fails,
    Fault::BatchLosesOne,
    send_batch_delivers_each
);
must_fail!(
    a_foreign_wire_format_fails,
    Fault::UnescapedSlashes,
    php_json_in_hermes_json_out
);
must_fail!(
    a_duplicated_send_fails_the_wire_check,
    Fault::SendsTwice,
    php_json_in_hermes_json_out
);
must_fail!(
    miscounted_claims_fail,
    Fault::MiscountsInFlight,
    stats_count_every_state
);
must_fail!(
    counters_that_lose_counts_fail,
    Fault::CountersLoseOne,
    counters_add_up_across_instances
);
must_fail!(
    group_pages_that_skip_a_group_fail,
    Fault::GroupPagesSkip,
    kept_groups_are_met_once_by_pages
);
must_fail!(
    record_pages_that_skip_a_record_fail,
    Fault::RecordPagesSkip,
    kept_records_are_met_once_by_pages
);
must_fail!(
    a_page_that_skips_a_message_fails,
    Fault::PageSkips,
    pages_meet_every_message_once
);
must_fail!(
    a_claiming_peek_fails,
    Fault::PeekClaims,
    peek_leaves_messages_where_they_were
);
must_fail!(
    a_purge_of_too_much_fails,
    Fault::PurgesEverything,
    purge_empties_only_what_it_names
);
must_fail!(
    dropped_dead_letters_fail,
    Fault::DropsDeadLetters,
    failed_messages_become_dead_letters_and_replay
);
must_fail!(
    a_replay_keeping_retries_fails,
    Fault::ReplayKeepsRetries,
    failed_messages_become_dead_letters_and_replay
);
must_fail!(
    at_most_once_fails,
    Fault::AcksOnReceive,
    vanished_instance_message_redelivered
);

/// A harness whose server is never there.
struct Unreachable;

#[async_trait]
impl Harness for Unreachable {
    type Driver = MemoryDriver;
    async fn available(&self) -> Result<(), String> {
        Err("nothing listens on 127.0.0.1:1".to_owned())
    }
    async fn open(&self, _queue: &str) -> Result<MemoryDriver, Error> {
        unreachable!("a scenario ran although the server is unavailable")
    }
    async fn push_raw(&self, _queue: &str, _bytes: &[u8]) -> Result<(), Error> {
        unreachable!()
    }
    async fn pull_raw(&self, _queue: &str) -> Result<Option<Vec<u8>>, Error> {
        unreachable!()
    }
    async fn quarantined(&self, _queue: &str) -> Result<usize, Error> {
        unreachable!()
    }
    fn visibility_timeout(&self) -> Duration {
        Duration::from_secs(1)
    }
}

#[test]
fn a_missing_server_skips_or_fails_when_strict() {
    let run = |strict: bool| {
        catch_unwind(AssertUnwindSafe(|| {
            suite::run_with_strictness(
                strict,
                || Unreachable,
                "round_trip",
                |h, q| async move { scenarios::round_trip_keeps_every_field(&*h, &q).await },
            )
        }))
    };
    assert!(run(false).is_ok(), "not strict: skipped");
    assert!(run(true).is_err(), "strict: fails");
}

must_fail!(
    workers_that_never_expire_fail,
    Fault::WorkersNeverExpire,
    workers_are_listed_until_they_expire
);

must_fail!(
    keys_kept_per_process_fail,
    Fault::KeysPerProcess,
    concurrent_unique_emits_queue_one_message
);
must_fail!(
    keys_never_released_fail,
    Fault::KeyNeverReleased,
    a_unique_key_is_free_once_its_message_is_done
);
must_fail!(
    keys_that_never_expire_fail,
    Fault::KeyNeverExpires,
    a_crashed_workers_unique_key_frees_after_its_window
);
must_fail!(
    schedulers_with_keys_per_process_fail,
    Fault::KeysPerProcess,
    three_schedulers_emit_one_message_per_tick
);

must_fail!(
    limits_kept_per_process_fail,
    Fault::LimitsPerProcess,
    a_concurrency_limit_holds_across_workers
);
must_fail!(
    rates_kept_per_process_fail,
    Fault::LimitsPerProcess,
    a_rate_holds_in_every_window
);
must_fail!(
    fast_rates_with_miscounted_starts_ahead_fail,
    Fault::StartsAheadMiscounted,
    a_fast_rate_holds_in_every_window
);
must_fail!(
    slots_that_never_expire_fail,
    Fault::SlotsNeverExpire,
    a_dead_holders_slot_frees_after_its_lease
);
must_fail!(
    miscounted_starts_ahead_fail,
    Fault::StartsAheadMiscounted,
    starts_recorded_ahead_fill_a_rate_exactly
);
must_fail!(
    snoozes_run_at_once_fail,
    Fault::IgnoresDelay,
    a_snoozed_job_runs_again_with_its_retries
);
must_fail!(
    pauses_kept_per_process_fail,
    Fault::ControlsPerProcess,
    pausing_stops_new_starts_and_resuming_restarts_them
);
must_fail!(
    cancellations_kept_per_process_fail,
    Fault::ControlsPerProcess,
    cancelling_stops_waiting_and_running_jobs
);
must_fail!(
    job_records_kept_per_process_fail,
    Fault::JobsPerProcess,
    results_round_trip_with_their_type
);
must_fail!(
    dropped_results_fail,
    Fault::DropsResults,
    results_round_trip_with_their_type
);
must_fail!(
    hidden_running_jobs_fail,
    Fault::HidesRunning,
    status_moves_through_its_states
);
must_fail!(
    members_counted_twice_fail,
    Fault::SettlesTwice,
    a_batch_runs_its_success_callback_once_after_its_last_job
);
must_fail!(
    members_counted_twice_fail_a_dead_batch,
    Fault::SettlesTwice,
    a_batch_with_a_dead_job_completes_without_success
);
must_fail!(
    callbacks_released_twice_fail,
    Fault::ReleasesTwice,
    a_batch_runs_its_success_callback_once_after_its_last_job
);
must_fail!(
    steps_without_results_fail,
    Fault::DropsStepResults,
    a_three_step_chain_passes_results_in_order
);
must_fail!(
    steps_released_twice_fail,
    Fault::ReleasesTwice,
    a_diamond_starts_its_last_step_once_with_both_results
);
must_fail!(
    every_copy_claiming_the_run_fails,
    Fault::ClaimsEveryCopy,
    a_second_copy_of_a_released_message_does_not_run
);
