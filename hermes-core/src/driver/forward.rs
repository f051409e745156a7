//! Forwarding a driver's calls to another one: the helper for wrappers, and `Driver` for
//! `Arc<D>` and `Box<D>`.

use std::sync::Arc;

use super::Driver;

/// Writes, inside an `impl Driver for …` block, the methods it names as calls of the same
/// method on an inner driver, so a wrapper writes only what it changes. `facets` forwards
/// every facet accessor ([`Driver::inspect`](crate::driver::Driver::inspect) and its
/// siblings), those added later too: a wrapper written with it keeps every facet of the driver
/// it wraps.
///
/// The inner driver is a field of the wrapper (`forward!(inner => …)`), or, for a smart pointer
/// to a driver, what it points to (`forward!(* => …)`). The async calls hand back the inner
/// driver's future as it is, without boxing it again.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use hermes_core::driver::{Driver, async_trait, forward};
/// use hermes_core::{Error, Message, Priority};
///
/// /// Counts the messages sent through it.
/// #[derive(Debug)]
/// struct Counting<D> {
///     inner: D,
///     sent: AtomicU64,
/// }
///
/// #[async_trait]
/// impl<D: Driver> Driver for Counting<D> {
///     async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
///         self.sent.fetch_add(1, Ordering::Relaxed);
///         self.inner.send(message, priority).await
///     }
///
///     forward!(inner => name, capabilities, setup_priority_queue, send_batch, receive, ack,
///         nack, extend, flush, facets);
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let driver = Counting { inner: hermes_testkit::MemoryDriver::new(), sent: AtomicU64::new(0) };
/// assert!(driver.inspect().is_some(), "the memory driver's figures, through the wrapper");
/// # }
/// ```
///
/// `clippy::missing_trait_methods` (allowed by default) tells when a wrapper leaves out a
/// method of the trait; every wrapper in Hermes' repository is checked with it.
#[macro_export]
macro_rules! forward {
    ($field:ident => $($method:ident),+ $(,)?) => {
        $($crate::forward!(@method [self.$field] $method);)+
    };
    (* => $($method:ident),+ $(,)?) => {
        $($crate::forward!(@method [(**self)] $method);)+
    };

    (@method [$($to:tt)+] name) => {
        fn name(&self) -> &'static str {
            $crate::forward!(@to self [$($to)+]).name()
        }
    };
    (@method [$($to:tt)+] capabilities) => {
        fn capabilities(&self) -> $crate::driver::Capabilities {
            $crate::forward!(@to self [$($to)+]).capabilities()
        }
    };
    (@method [$($to:tt)+] setup_priority_queue) => {
        fn setup_priority_queue(
            &self,
            name: &str,
            priority: $crate::Priority,
        ) -> ::core::result::Result<(), $crate::Error> {
            $crate::forward!(@to self [$($to)+]).setup_priority_queue(name, priority)
        }
    };
    (@method [$($to:tt)+] send) => {
        $crate::forward!(@async [$($to)+] send(message: &$crate::Message, priority: $crate::Priority) -> ());
    };
    (@method [$($to:tt)+] send_batch) => {
        $crate::forward!(@async [$($to)+] send_batch(messages: &[$crate::Message], priority: $crate::Priority) -> ());
    };
    (@method [$($to:tt)+] receive) => {
        $crate::forward!(@async [$($to)+] receive(
            priorities: &[$crate::Priority],
            wait: ::core::time::Duration
        ) -> ::core::option::Option<$crate::driver::Delivery>);
    };
    (@method [$($to:tt)+] ack) => {
        $crate::forward!(@async [$($to)+] ack(delivery: &$crate::driver::Delivery) -> ());
    };
    (@method [$($to:tt)+] nack) => {
        $crate::forward!(@async [$($to)+] nack(delivery: &$crate::driver::Delivery) -> ());
    };
    (@method [$($to:tt)+] extend) => {
        $crate::forward!(@async [$($to)+] extend(
            delivery: &$crate::driver::Delivery,
            by: ::core::time::Duration
        ) -> ());
    };
    (@method [$($to:tt)+] flush) => {
        fn flush<'life0, 'async_trait>(
            &'life0 self,
        ) -> ::core::pin::Pin<::std::boxed::Box<
            dyn ::core::future::Future<Output = ::core::result::Result<(), $crate::Error>>
                + ::core::marker::Send
                + 'async_trait,
        >>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            $crate::forward!(@to self [$($to)+]).flush()
        }
    };
    (@method [$($to:tt)+] facets) => {
        fn inspect(&self) -> ::core::option::Option<&dyn $crate::driver::Inspect> {
            $crate::forward!(@to self [$($to)+]).inspect()
        }
        fn browse(&self) -> ::core::option::Option<&dyn $crate::driver::Browse> {
            $crate::forward!(@to self [$($to)+]).browse()
        }
        fn dead_letters(&self) -> ::core::option::Option<&dyn $crate::driver::DeadLetters> {
            $crate::forward!(@to self [$($to)+]).dead_letters()
        }
        fn workers(&self) -> ::core::option::Option<&dyn $crate::driver::Workers> {
            $crate::forward!(@to self [$($to)+]).workers()
        }
        fn unique(&self) -> ::core::option::Option<&dyn $crate::driver::UniqueEmits> {
            $crate::forward!(@to self [$($to)+]).unique()
        }
        fn limits(&self) -> ::core::option::Option<&dyn $crate::driver::LimitStore> {
            $crate::forward!(@to self [$($to)+]).limits()
        }
        fn controls(&self) -> ::core::option::Option<&dyn $crate::driver::Controls> {
            $crate::forward!(@to self [$($to)+]).controls()
        }
        fn jobs(&self) -> ::core::option::Option<&dyn $crate::driver::JobStore> {
            $crate::forward!(@to self [$($to)+]).jobs()
        }
        fn counters(&self) -> ::core::option::Option<&dyn $crate::driver::Counters> {
            $crate::forward!(@to self [$($to)+]).counters()
        }
    };

    // An async call of one borrowed argument and the others by value, with the signature
    // `async_trait` gives it, handing back the inner driver's boxed future.
    (@async [$($to:tt)+] $name:ident(
        $first:ident: &$borrowed:ty $(, $rest:ident: $by_value:ty)*
    ) -> $output:ty) => {
        fn $name<'life0, 'life1, 'async_trait>(
            &'life0 self,
            $first: &'life1 $borrowed,
            $($rest: $by_value),*
        ) -> ::core::pin::Pin<::std::boxed::Box<
            dyn ::core::future::Future<Output = ::core::result::Result<$output, $crate::Error>>
                + ::core::marker::Send
                + 'async_trait,
        >>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            Self: 'async_trait,
        {
            $crate::forward!(@to self [$($to)+]).$name($first $(, $rest)*)
        }
    };

    // The inner driver, with the `self` of the method being written.
    (@to $self:ident [self . $field:ident]) => { $self.$field };
    (@to $self:ident [(**self)]) => { (**$self) };
}

/// `Driver` for `Arc<D>` and `Box<D>`: every call, and every facet, is the pointee's.
macro_rules! delegate_driver {
    ($($wrapper:ident),*) => {$(
        #[async_trait::async_trait]
        #[warn(clippy::missing_trait_methods)]
        impl<D: Driver + ?Sized> Driver for $wrapper<D> {
            crate::forward!(* => name, capabilities, setup_priority_queue, send, send_batch,
                receive, ack, nack, extend, flush, facets);
        }
    )*};
}

delegate_driver!(Arc, Box);
