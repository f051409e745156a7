//! The conformance suite on the filesystem driver, on a temporary directory.

mod common;

mod direct {
    hermes_testkit::conformance_suite!(super::common::FsHarness::new());
}
