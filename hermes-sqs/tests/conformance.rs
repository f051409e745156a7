//! The conformance suite on the SQS driver, against the SQS-compatible server at
//! `HERMES_SQS_ENDPOINT` (default http://127.0.0.1:4566, moto), directly and through
//! `Arc<dyn Driver>`.

mod common;

mod direct {
    hermes_testkit::conformance_suite!(super::common::SqsHarness);
}

mod dyn_driver {
    hermes_testkit::conformance_suite!(hermes_testkit::suite::DynHarness(
        super::common::SqsHarness
    ));
}

mod sealed {
    hermes_testkit::serializer_suite!(hermes_testkit::suite::SerializedHarness::sealing(
        super::common::SqsHarness
    ));
}

mod wrapped {
    hermes_testkit::wrapped_facet_suite!(super::common::SqsHarness);
}
