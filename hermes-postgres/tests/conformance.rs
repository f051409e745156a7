//! The conformance suite on the PostgreSQL driver, on a schema of the tests' own, directly and
//! through `Arc<dyn Driver>`, through a wrapper that forwards the facets, and with sealed
//! payloads.

mod common;

mod direct {
    hermes_testkit::conformance_suite!(super::common::PostgresHarness);
}

mod dyn_driver {
    hermes_testkit::conformance_suite!(hermes_testkit::suite::DynHarness(
        super::common::PostgresHarness
    ));
}

mod sealed {
    hermes_testkit::serializer_suite!(hermes_testkit::suite::SerializedHarness::sealing(
        super::common::PostgresHarness
    ));
}

mod wrapped {
    hermes_testkit::wrapped_facet_suite!(super::common::PostgresHarness);
}
