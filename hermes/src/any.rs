//! A driver of whichever backend a URL named.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use hermes_core::driver::{
    Browse, Capabilities, Controls, Counters, DeadLetters, Delivery, Inspect, JobStore, LimitStore,
    UniqueEmits, Workers,
};
use hermes_core::{Driver, Error, Message, Priority, Serializer, Shutdown};

/// The driver [`connect`](crate::connect) opened: one variant per backend this build has. It
/// is a [`Driver`] itself, with every facet of the backend's driver, and cheap to clone;
/// match on it to reach what only one backend offers.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), hermes::Error> {
/// use hermes::{AnyDriver, Driver};
///
/// let driver = hermes::connect("memory://doc-any").await?;
/// assert_eq!(driver.name(), "memory");
/// assert!(driver.inspect().is_some(), "the memory driver counts its messages");
/// if let AnyDriver::Memory(memory) = &driver {
///     assert!(memory.is_empty());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyDriver {
    /// A local directory.
    #[cfg(feature = "fs")]
    #[cfg_attr(docsrs, doc(cfg(feature = "fs")))]
    FileSystem(hermes_fs::FileSystemDriver),
    /// Redis, on either client.
    #[cfg(any(feature = "redis", feature = "fred"))]
    #[cfg_attr(docsrs, doc(cfg(any(feature = "redis", feature = "fred"))))]
    Redis(hermes_redis::RedisSetDriver),
    /// RabbitMQ.
    #[cfg(feature = "rabbitmq")]
    #[cfg_attr(docsrs, doc(cfg(feature = "rabbitmq")))]
    RabbitMq(hermes_rabbitmq::RabbitMqDriver),
    /// Amazon SQS.
    #[cfg(feature = "sqs")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sqs")))]
    Sqs(hermes_sqs::SqsDriver),
    /// PostgreSQL.
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    Postgres(hermes_postgres::PostgresDriver),
    /// This process's memory.
    #[cfg(feature = "memory")]
    #[cfg_attr(docsrs, doc(cfg(feature = "memory")))]
    Memory(hermes_testkit::MemoryDriver),
}

/// `$body` for the driver in whichever variant `$any` is, named `$driver`.
macro_rules! each {
    ($any:expr, $driver:ident => $body:expr) => {
        match $any {
            #[cfg(feature = "fs")]
            AnyDriver::FileSystem($driver) => $body,
            #[cfg(any(feature = "redis", feature = "fred"))]
            AnyDriver::Redis($driver) => $body,
            #[cfg(feature = "rabbitmq")]
            AnyDriver::RabbitMq($driver) => $body,
            #[cfg(feature = "sqs")]
            AnyDriver::Sqs($driver) => $body,
            #[cfg(feature = "postgres")]
            AnyDriver::Postgres($driver) => $body,
            #[cfg(feature = "memory")]
            AnyDriver::Memory($driver) => $body,
        }
    };
}

/// The future of a driver call, as `async_trait` boxes it.
type DriverFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// An async call of one borrowed argument and the others by value, with the signature
/// `async_trait` gives it: the backend driver's boxed future is handed back as it is.
macro_rules! each_async {
    ($name:ident($first:ident: &$borrowed:ty $(, $rest:ident: $by_value:ty)*) -> $output:ty) => {
        fn $name<'life0, 'life1, 'async_trait>(
            &'life0 self,
            $first: &'life1 $borrowed,
            $($rest: $by_value),*
        ) -> DriverFuture<'async_trait, $output>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            Self: 'async_trait,
        {
            each!(self, driver => driver.$name($first $(, $rest)*))
        }
    };
}

impl AnyDriver {
    /// The same queues with `serializer` instead of Hermes' JSON, as a new instance. A PHP
    /// process sharing the queue reads only Hermes' JSON.
    #[must_use]
    pub fn with_serializer(self, serializer: impl Serializer) -> Self {
        match self {
            #[cfg(feature = "fs")]
            AnyDriver::FileSystem(driver) => {
                AnyDriver::FileSystem(driver.with_serializer(serializer))
            }
            #[cfg(any(feature = "redis", feature = "fred"))]
            AnyDriver::Redis(driver) => AnyDriver::Redis(driver.with_serializer(serializer)),
            #[cfg(feature = "rabbitmq")]
            AnyDriver::RabbitMq(driver) => AnyDriver::RabbitMq(driver.with_serializer(serializer)),
            #[cfg(feature = "sqs")]
            AnyDriver::Sqs(driver) => AnyDriver::Sqs(driver.with_serializer(serializer)),
            #[cfg(feature = "postgres")]
            AnyDriver::Postgres(driver) => AnyDriver::Postgres(driver.with_serializer(serializer)),
            #[cfg(feature = "memory")]
            AnyDriver::Memory(driver) => AnyDriver::Memory(driver.with_serializer(serializer)),
        }
    }

    /// The shutdown signal the workers of this queue watch by default, where the backend has
    /// a place all of them see: the file `shutdown` in a filesystem driver's directory, the
    /// key `<default set>_shutdown` of a Redis driver (`hermes_shutdown`, as PHP Hermes). `None`
    /// for a broker without one (RabbitMQ, SQS: give the workers a
    /// [`SharedFileShutdown`](hermes_core::SharedFileShutdown) of their own) and for memory.
    pub fn shutdown_signal(&self) -> Option<Box<dyn Shutdown>> {
        match self {
            #[cfg(feature = "fs")]
            AnyDriver::FileSystem(driver) => Some(Box::new(hermes_core::SharedFileShutdown::new(
                driver.directory().join("shutdown"),
            ))),
            #[cfg(any(feature = "redis", feature = "fred"))]
            AnyDriver::Redis(driver) => Some(Box::new(hermes_redis::RedisShutdown::new(
                driver.client(),
                format!("{}_shutdown", driver.options().key),
            ))),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}

/// Every call and every facet is the backend driver's; the async calls hand back its future
/// as it is, without boxing it again.
#[warn(clippy::missing_trait_methods)]
impl Driver for AnyDriver {
    fn name(&self) -> &'static str {
        each!(self, driver => driver.name())
    }

    fn capabilities(&self) -> Capabilities {
        each!(self, driver => driver.capabilities())
    }

    fn setup_priority_queue(&self, name: &str, priority: Priority) -> Result<(), Error> {
        each!(self, driver => driver.setup_priority_queue(name, priority))
    }

    each_async!(send(message: &Message, priority: Priority) -> ());
    each_async!(send_batch(messages: &[Message], priority: Priority) -> ());
    each_async!(receive(priorities: &[Priority], wait: Duration) -> Option<Delivery>);
    each_async!(ack(delivery: &Delivery) -> ());
    each_async!(nack(delivery: &Delivery) -> ());
    each_async!(extend(delivery: &Delivery, by: Duration) -> ());

    fn flush<'life0, 'async_trait>(&'life0 self) -> DriverFuture<'async_trait, ()>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        each!(self, driver => driver.flush())
    }

    fn inspect(&self) -> Option<&dyn Inspect> {
        each!(self, driver => driver.inspect())
    }

    fn browse(&self) -> Option<&dyn Browse> {
        each!(self, driver => driver.browse())
    }

    fn dead_letters(&self) -> Option<&dyn DeadLetters> {
        each!(self, driver => driver.dead_letters())
    }

    fn workers(&self) -> Option<&dyn Workers> {
        each!(self, driver => driver.workers())
    }

    fn unique(&self) -> Option<&dyn UniqueEmits> {
        each!(self, driver => driver.unique())
    }

    fn limits(&self) -> Option<&dyn LimitStore> {
        each!(self, driver => driver.limits())
    }

    fn counters(&self) -> Option<&dyn Counters> {
        each!(self, driver => driver.counters())
    }

    fn controls(&self) -> Option<&dyn Controls> {
        each!(self, driver => driver.controls())
    }

    fn jobs(&self) -> Option<&dyn JobStore> {
        each!(self, driver => driver.jobs())
    }
}
