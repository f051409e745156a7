//! The conformance suite on the RabbitMQ driver, against the broker at `HERMES_AMQP_URL`
//! (default amqp://guest:guest@127.0.0.1:5672/%2f).

mod common;

mod direct {
    hermes_testkit::conformance_suite!(super::common::RabbitHarness);
}

mod dyn_driver {
    hermes_testkit::conformance_suite!(hermes_testkit::suite::DynHarness(
        super::common::RabbitHarness
    ));
}
