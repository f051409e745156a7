//! The suite fails drivers that break the contract: each faulty wrapper of the memory driver
//! must make the scenario aimed at its fault fail.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use hermes_core::{
    Capabilities, DEFAULT_PRIORITY, Delivery, Driver, Error, Message, Priority, async_trait,
};
use hermes_testkit::suite::{self, Harness, scenarios};
use hermes_testkit::{MemoryDriver, MemoryHarness};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
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
}

#[derive(Debug)]
struct Faulty {
    inner: MemoryDriver,
    fault: Fault,
}

#[async_trait]
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
}

struct FaultyHarness(MemoryHarness, Fault);

#[async_trait]
impl Harness for FaultyHarness {
    type Driver = Faulty;
    async fn open(&self, queue: &str) -> Result<Faulty, Error> {
        Ok(Faulty {
            inner: self.0.open(queue).await?,
            fault: self.1,
        })
    }
    async fn push_raw(&self, queue: &str, bytes: &[u8]) -> Result<(), Error> {
        self.0.push_raw(queue, bytes).await
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
