//! The conformance suite on the filesystem driver, on a temporary directory, directly and
//! through `Arc<dyn Driver>`.

mod common;

mod direct {
    hermes_testkit::conformance_suite!(super::common::FsHarness::new());
}

mod dyn_driver {
    hermes_testkit::conformance_suite!(hermes_testkit::suite::DynHarness(
        super::common::FsHarness::new()
    ));
}

mod sealed {
    hermes_testkit::serializer_suite!(hermes_testkit::suite::SerializedHarness::sealing(
        super::common::FsHarness::new()
    ));
}

mod wrapped {
    hermes_testkit::wrapped_facet_suite!(super::common::FsHarness::new());
}
