//! The conformance suite on both Redis drivers, against the Redis at `HERMES_REDIS_URL`
//! (default 127.0.0.1:6379).

mod common;

mod redis_rs {
    hermes_testkit::conformance_suite!(super::common::RedisHarness(
        super::common::Library::RedisRs
    ));
}

mod fred {
    hermes_testkit::conformance_suite!(super::common::RedisHarness(super::common::Library::Fred));
}

mod redis_rs_dyn {
    hermes_testkit::conformance_suite!(hermes_testkit::suite::DynHarness(
        super::common::RedisHarness(super::common::Library::RedisRs)
    ));
}
