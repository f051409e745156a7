//! The conformance suite on the RabbitMQ driver, against the broker at `HERMES_AMQP_URL`
//! (default amqp://guest:guest@127.0.0.1:5672/%2f): on classic queues, as Hermes declares
//! them, directly and as `Arc<dyn Driver>`, and on quorum queues.

mod common;

mod direct {
    hermes_testkit::conformance_suite!(super::common::CLASSIC);
}

mod dyn_driver {
    hermes_testkit::conformance_suite!(hermes_testkit::suite::DynHarness(super::common::CLASSIC));
}

mod quorum {
    hermes_testkit::conformance_suite!(super::common::QUORUM);
}

mod sealed {
    hermes_testkit::serializer_suite!(hermes_testkit::suite::SerializedHarness::sealing(
        super::common::CLASSIC
    ));
}

mod wrapped {
    hermes_testkit::wrapped_facet_suite!(super::common::CLASSIC);
}

/// The flow-control and tracking scenarios with the limits, pauses, cancellations, records and
/// groups on Redis.
mod with_redis_store {
    hermes_testkit::store_suite!(hermes_testkit::suite::StoreHarness::new(
        super::common::CLASSIC,
        |queue| async move {
            let redis = std::env::var("HERMES_REDIS_URL")
                .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
            hermes_redis::RedisSetDriver::from_url(&format!("{redis}?key={queue}")).await
        },
    ));
}
