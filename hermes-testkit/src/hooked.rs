//! A driver wrapper for tests: counts the calls of each operation and runs hooks before them,
//! which can fail a call instead of passing it on.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hermes_core::driver::{Capabilities, Delivery, async_trait, forward};
use hermes_core::{Driver, Error, Message, Priority};

/// An operation of the [`Driver`] trait, as [`HookedDriver`] counts and hooks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// [`Driver::setup_priority_queue`].
    SetupPriorityQueue,
    /// [`Driver::send`].
    Send,
    /// [`Driver::send_batch`].
    SendBatch,
    /// [`Driver::receive`].
    Receive,
    /// [`Driver::ack`].
    Ack,
    /// [`Driver::nack`].
    Nack,
    /// [`Driver::extend`].
    Extend,
    /// [`Driver::flush`].
    Flush,
}

impl Op {
    /// Every operation, in the order of the trait.
    pub const ALL: [Op; 8] = [
        Op::SetupPriorityQueue,
        Op::Send,
        Op::SendBatch,
        Op::Receive,
        Op::Ack,
        Op::Nack,
        Op::Extend,
        Op::Flush,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// One call, as the hooks see it.
enum Call<'a> {
    SetupPriorityQueue(&'a str, Priority),
    Send(&'a Message, Priority),
    SendBatch(&'a [Message], Priority),
    Receive(&'a [Priority], Duration),
    Ack(&'a Delivery),
    Nack(&'a Delivery),
    Extend(&'a Delivery, Duration),
    Flush,
}

impl Call<'_> {
    fn op(&self) -> Op {
        match self {
            Call::SetupPriorityQueue(..) => Op::SetupPriorityQueue,
            Call::Send(..) => Op::Send,
            Call::SendBatch(..) => Op::SendBatch,
            Call::Receive(..) => Op::Receive,
            Call::Ack(..) => Op::Ack,
            Call::Nack(..) => Op::Nack,
            Call::Extend(..) => Op::Extend,
            Call::Flush => Op::Flush,
        }
    }

    /// The messages the call carries: the one sent, those of a batch, or the delivery's.
    fn messages(&self) -> &[Message] {
        match self {
            Call::Send(message, _) => std::slice::from_ref(*message),
            Call::SendBatch(messages, _) => messages,
            Call::Ack(delivery) | Call::Nack(delivery) | Call::Extend(delivery, _) => {
                std::slice::from_ref(delivery.message())
            }
            Call::SetupPriorityQueue(..) | Call::Receive(..) | Call::Flush => &[],
        }
    }
}

/// A hook: the call, its number among the calls of its operation (from 1), and `Err` to fail
/// the call with.
type Hook = Box<dyn Fn(&Call<'_>, usize) -> Result<(), Error> + Send + Sync>;

/// A driver around another one, for tests: it passes every [`Driver`] call on to the inner
/// driver, counts the calls of each [operation](Op), and first runs the hooks a test installed
/// for the operation; a hook that returns an error fails the call with it, and the inner
/// driver is not called.
///
/// Hooks run in the order they were added, and the first error wins. Every call counts, the
/// failed ones too. The wrapper keeps the inner driver's name and capabilities unless told
/// otherwise ([`named`](HookedDriver::named), [`with_capabilities`](HookedDriver::with_capabilities)),
/// and passes [`send_batch`](Driver::send_batch) on as one call, so the inner driver's own
/// batching is what runs. Its `Debug` shows the name, the counts and the hooked operations,
/// never a message.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), hermes_core::Error> {
/// use std::time::Duration;
/// use hermes_core::{Driver, Error, Message, DEFAULT_PRIORITY};
/// use hermes_testkit::{HookedDriver, MemoryDriver, Op};
///
/// let lost = || Error::connection("flaky", std::io::Error::other("connection reset"));
/// let driver = HookedDriver::new(MemoryDriver::new())
///     .named("flaky")
///     .fail_first(Op::Receive, 2, lost)
///     .fail_on_message(Op::Send, "refused", || Error::driver("flaky", "no", false));
///
/// driver.send(&Message::new("ping"), DEFAULT_PRIORITY).await?;
/// let refused = Message::builder("ping").id("refused").build()?;
/// assert!(driver.send(&refused, DEFAULT_PRIORITY).await.is_err());
///
/// let wait = Duration::from_secs(1);
/// assert!(driver.receive(&[], wait).await.unwrap_err().is_temporary());
/// assert!(driver.receive(&[], wait).await.unwrap_err().is_temporary());
/// let delivery = driver.receive(&[], wait).await?.expect("the third receive gets it");
/// driver.ack(&delivery).await?;
///
/// assert_eq!((driver.calls(Op::Send), driver.calls(Op::Receive)), (2, 3));
/// assert!(driver.inner().is_empty(), "the refused message never reached the queue");
/// # Ok(()) }
/// ```
pub struct HookedDriver<D> {
    inner: D,
    name: Option<&'static str>,
    capabilities: Option<Capabilities>,
    hooks: [Vec<Hook>; Op::ALL.len()],
    calls: [AtomicUsize; Op::ALL.len()],
}

impl<D: Driver> HookedDriver<D> {
    /// Wraps `inner`, without hooks.
    pub fn new(inner: D) -> Self {
        HookedDriver {
            inner,
            name: None,
            capabilities: None,
            hooks: Default::default(),
            calls: Default::default(),
        }
    }

    /// Reports `name` as the driver's name (in log lines, say) instead of the inner driver's.
    #[must_use]
    pub fn named(mut self, name: &'static str) -> Self {
        self.name = Some(name);
        self
    }

    /// Declares `capabilities` instead of the inner driver's.
    #[must_use]
    pub fn with_capabilities(mut self, capabilities: Capabilities) -> Self {
        self.capabilities = Some(capabilities);
        self
    }

    /// Fails calls number 1 to `n` of `op` with the error `error` makes (`usize::MAX`: every
    /// call); later calls go on to the inner driver.
    #[must_use]
    pub fn fail_first(
        self,
        op: Op,
        n: usize,
        error: impl Fn() -> Error + Send + Sync + 'static,
    ) -> Self {
        self.hook(
            op,
            move |_, number| if number <= n { Err(error()) } else { Ok(()) },
        )
    }

    /// Fails the calls of `op` that carry a message with the id `id` (a sent one, one of a
    /// batch, or a delivery's) with the error `error` makes. The other calls, and every call of
    /// an operation without messages (receive, flush, setup), go on to the inner driver.
    #[must_use]
    pub fn fail_on_message(
        self,
        op: Op,
        id: impl Into<String>,
        error: impl Fn() -> Error + Send + Sync + 'static,
    ) -> Self {
        let id = id.into();
        self.hook(op, move |call, _| {
            if call.messages().iter().any(|m| m.id() == id) {
                Err(error())
            } else {
                Ok(())
            }
        })
    }

    /// Runs `hook` before each [`flush`](Driver::flush); an `Err` fails the call.
    #[must_use]
    pub fn on_flush(self, hook: impl Fn() -> Result<(), Error> + Send + Sync + 'static) -> Self {
        self.hook(Op::Flush, move |_, _| hook())
    }

    fn hook(
        mut self,
        op: Op,
        hook: impl Fn(&Call<'_>, usize) -> Result<(), Error> + Send + Sync + 'static,
    ) -> Self {
        self.hooks[op.index()].push(Box::new(hook));
        self
    }

    /// How many times `op` was called, the calls a hook failed included.
    pub fn calls(&self, op: Op) -> usize {
        self.calls[op.index()].load(Ordering::SeqCst)
    }

    /// The inner driver.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The inner driver, unwrapped.
    pub fn into_inner(self) -> D {
        self.inner
    }

    /// Counts `call` and runs the hooks of its operation.
    fn before(&self, call: Call<'_>) -> Result<(), Error> {
        let op = call.op();
        let number = self.calls[op.index()].fetch_add(1, Ordering::SeqCst) + 1;
        self.hooks[op.index()]
            .iter()
            .try_for_each(|hook| hook(&call, number))
    }
}

/// The builders of typed hooks: one per operation with arguments, handing its hook the
/// arguments of each call.
macro_rules! typed_hooks {
    ($($(#[$doc:meta])* $method:ident => $variant:ident($($arg:ident: $ty:ty),*);)*) => {
        impl<D: Driver> HookedDriver<D> {
            $(
                $(#[$doc])*
                #[must_use]
                pub fn $method(
                    self,
                    hook: impl Fn($($ty),*) -> Result<(), Error> + Send + Sync + 'static,
                ) -> Self {
                    self.hook(Op::$variant, move |call, _| match call {
                        Call::$variant($($arg),*) => hook($(*$arg),*),
                        _ => Ok(()),
                    })
                }
            )*
        }
    };
}

typed_hooks! {
    /// Runs `hook` before each [`setup_priority_queue`](Driver::setup_priority_queue), with
    /// the queue name and priority; an `Err` fails the call.
    on_setup_priority_queue => SetupPriorityQueue(name: &str, priority: Priority);
    /// Runs `hook` before each [`send`](Driver::send), with the message and priority; an
    /// `Err` fails the call.
    on_send => Send(message: &Message, priority: Priority);
    /// Runs `hook` before each [`send_batch`](Driver::send_batch), with the messages and
    /// priority; an `Err` fails the call (nothing of the batch is sent).
    on_send_batch => SendBatch(messages: &[Message], priority: Priority);
    /// Runs `hook` before each [`receive`](Driver::receive), with the priority filter and the
    /// wait; an `Err` fails the call (nothing is claimed).
    on_receive => Receive(priorities: &[Priority], wait: Duration);
    /// Runs `hook` before each [`ack`](Driver::ack), with the delivery; an `Err` fails the
    /// call (the message stays claimed).
    on_ack => Ack(delivery: &Delivery);
    /// Runs `hook` before each [`nack`](Driver::nack), with the delivery; an `Err` fails the
    /// call (the message stays claimed).
    on_nack => Nack(delivery: &Delivery);
    /// Runs `hook` before each [`extend`](Driver::extend), with the delivery and the
    /// extension; an `Err` fails the call (the claim is not extended).
    on_extend => Extend(delivery: &Delivery, by: Duration);
}

impl<D: Driver> fmt::Debug for HookedDriver<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Calls<'a, D>(&'a HookedDriver<D>);
        impl<D: Driver> fmt::Debug for Calls<'_, D> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_map()
                    .entries(Op::ALL.iter().map(|op| (op, self.0.calls(*op))))
                    .finish()
            }
        }
        let hooked: Vec<Op> = Op::ALL
            .into_iter()
            .filter(|op| !self.hooks[op.index()].is_empty())
            .collect();
        f.debug_struct("HookedDriver")
            .field("name", &self.name())
            .field("inner", &self.inner.name())
            .field("calls", &Calls(self))
            .field("hooked", &hooked)
            .finish_non_exhaustive()
    }
}

#[async_trait]
#[warn(clippy::missing_trait_methods)]
impl<D: Driver> Driver for HookedDriver<D> {
    fn name(&self) -> &'static str {
        self.name.unwrap_or_else(|| self.inner.name())
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
            .unwrap_or_else(|| self.inner.capabilities())
    }

    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        self.before(Call::SetupPriorityQueue(name, priority))?;
        self.inner.setup_priority_queue(name, priority)
    }

    async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        self.before(Call::Send(message, priority))?;
        self.inner.send(message, priority).await
    }

    async fn send_batch(&self, messages: &[Message], priority: Priority) -> Result<(), Error> {
        self.before(Call::SendBatch(messages, priority))?;
        self.inner.send_batch(messages, priority).await
    }

    async fn receive(
        &self,
        priorities: &[Priority],
        wait: Duration,
    ) -> Result<Option<Delivery>, Error> {
        self.before(Call::Receive(priorities, wait))?;
        self.inner.receive(priorities, wait).await
    }

    async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.before(Call::Ack(delivery))?;
        self.inner.ack(delivery).await
    }

    async fn nack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.before(Call::Nack(delivery))?;
        self.inner.nack(delivery).await
    }

    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), Error> {
        self.before(Call::Extend(delivery, by))?;
        self.inner.extend(delivery, by).await
    }

    async fn flush(&self) -> Result<(), Error> {
        self.before(Call::Flush)?;
        self.inner.flush().await
    }

    // The facets pass on as they are, without hooks or counts.
    forward!(inner => facets);
}

#[cfg(test)]
mod tests {
    use hermes_core::DEFAULT_PRIORITY;

    use super::*;
    use crate::MemoryDriver;

    fn refused() -> Error {
        Error::driver("hooked", "refused", false)
    }

    #[tokio::test]
    async fn every_operation_is_counted_and_passed_on() {
        let driver = HookedDriver::new(MemoryDriver::new());
        driver.setup_priority_queue("high", 200).unwrap();
        driver
            .send(&Message::new("a"), DEFAULT_PRIORITY)
            .await
            .unwrap();
        driver
            .send_batch(&[Message::new("b"), Message::new("c")], 200)
            .await
            .unwrap();
        let first = driver.receive(&[], Duration::ZERO).await.unwrap().unwrap();
        driver.extend(&first, Duration::from_secs(5)).await.unwrap();
        driver.nack(&first).await.unwrap();
        let again = driver.receive(&[], Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(again.message().id(), first.message().id());
        driver.ack(&again).await.unwrap();
        driver.flush().await.unwrap();
        let counts: Vec<usize> = Op::ALL.iter().map(|op| driver.calls(*op)).collect();
        assert_eq!(counts, [1, 1, 1, 2, 1, 1, 1, 1]);
        assert_eq!(driver.inner().len(), 2);
        assert_eq!(driver.name(), "memory");
        assert_eq!(driver.capabilities(), MemoryDriver::new().capabilities());
    }

    #[tokio::test]
    async fn a_failing_hook_keeps_the_call_from_the_inner_driver() {
        let driver = HookedDriver::new(MemoryDriver::new())
            .fail_first(Op::Send, 1, refused)
            .on_send_batch(|messages, _| match messages.len() {
                2 => Err(refused()),
                _ => Ok(()),
            })
            .fail_on_message(Op::Ack, "kept", refused)
            .on_setup_priority_queue(|name, _| match name {
                "bad" => Err(refused()),
                _ => Ok(()),
            });
        assert!(driver.setup_priority_queue("bad", 5).is_err());
        assert!(driver.inner().queue_name(5).is_none());
        let kept = Message::builder("t").id("kept").build().unwrap();
        assert!(driver.send(&kept, DEFAULT_PRIORITY).await.is_err());
        assert!(driver.inner().is_empty(), "the first send failed");
        driver.send(&kept, DEFAULT_PRIORITY).await.unwrap();
        let pair = [Message::new("x"), Message::new("y")];
        assert!(driver.send_batch(&pair, DEFAULT_PRIORITY).await.is_err());
        assert_eq!(driver.inner().len(), 1, "the batch failed whole");

        let d = driver.receive(&[], Duration::ZERO).await.unwrap().unwrap();
        assert!(driver.ack(&d).await.is_err());
        assert_eq!(driver.inner().len(), 1, "still claimed");
        assert_eq!(driver.calls(Op::Send), 2, "failed calls count too");
    }

    #[tokio::test]
    async fn hooks_of_one_operation_run_in_order_and_the_first_error_wins() {
        let driver = HookedDriver::new(MemoryDriver::new())
            .on_receive(|_, _| Err(Error::driver("hooked", "first", false)))
            .on_receive(|_, _| Err(Error::driver("hooked", "second", false)));
        let err = driver.receive(&[], Duration::ZERO).await.unwrap_err();
        assert!(err.to_string().contains("first"), "{err}");
    }

    #[test]
    fn debug_shows_counts_and_hooks_but_no_message() {
        let inner = MemoryDriver::new();
        inner
            .push_raw(DEFAULT_PRIORITY, b"secret@example.com")
            .unwrap();
        let mut capabilities = Capabilities::default();
        capabilities.delay = true;
        let driver = HookedDriver::new(inner)
            .named("counting")
            .with_capabilities(capabilities)
            .on_flush(|| Ok(()));
        let debug = format!("{driver:?}");
        assert!(!debug.contains("secret"), "{debug}");
        assert!(
            debug.contains(r#"name: "counting", inner: "memory""#),
            "{debug}"
        );
        assert!(
            debug.contains("Send: 0") && debug.contains("hooked: [Flush]"),
            "{debug}"
        );
        assert_eq!(driver.capabilities(), capabilities);
    }
}
