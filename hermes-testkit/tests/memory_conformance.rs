//! The conformance suite on the memory driver, directly and through `Arc<dyn Driver>`.

mod direct {
    hermes_testkit::conformance_suite!(hermes_testkit::MemoryHarness::new());
}

mod dyn_driver {
    hermes_testkit::conformance_suite!(hermes_testkit::suite::DynHarness(
        hermes_testkit::MemoryHarness::new()
    ));
}

mod sealed {
    hermes_testkit::serializer_suite!(hermes_testkit::suite::SerializedHarness::sealing(
        hermes_testkit::MemoryHarness::new()
    ));
}

mod wrapped {
    hermes_testkit::wrapped_facet_suite!(hermes_testkit::MemoryHarness::new());
}
