//! The conformance suite on both Redis drivers: against the Redis at `HERMES_REDIS_URL`
//! (default 127.0.0.1:6379) in both delivery modes, with deferred and immediate
//! acknowledgements, through `Arc<dyn Driver>`, and on the
//! three-node cluster at `HERMES_REDIS_CLUSTER_URL` (default 127.0.0.1:7001).

mod common;

use common::{Library, RedisHarness, Setup};
use hermes_redis::DeliveryMode;

const AT_MOST_ONCE: Setup = Setup {
    library: Library::RedisRs,
    mode: DeliveryMode::AtMostOnce,
    cluster: false,
    immediate_acks: false,
};
const FRED_AT_MOST_ONCE: Setup = Setup {
    library: Library::Fred,
    mode: DeliveryMode::AtMostOnce,
    cluster: false,
    immediate_acks: false,
};
const CLUSTER: Setup = Setup {
    library: Library::RedisRs,
    mode: DeliveryMode::AtLeastOnce,
    cluster: true,
    immediate_acks: false,
};
const FRED_CLUSTER: Setup = Setup {
    library: Library::Fred,
    mode: DeliveryMode::AtLeastOnce,
    cluster: true,
    immediate_acks: false,
};

const IMMEDIATE_ACKS: Setup = Setup {
    library: Library::RedisRs,
    mode: DeliveryMode::AtLeastOnce,
    cluster: false,
    immediate_acks: true,
};

mod redis_rs {
    hermes_testkit::conformance_suite!(super::RedisHarness(super::Setup::REDIS_RS));
}

mod fred {
    hermes_testkit::conformance_suite!(super::RedisHarness(super::Setup::FRED));
}

mod redis_rs_dyn {
    hermes_testkit::conformance_suite!(hermes_testkit::suite::DynHarness(super::RedisHarness(
        super::Setup::REDIS_RS
    )));
}

mod redis_rs_at_most_once {
    hermes_testkit::conformance_suite!(super::RedisHarness(super::AT_MOST_ONCE));
}

mod fred_at_most_once {
    hermes_testkit::conformance_suite!(super::RedisHarness(super::FRED_AT_MOST_ONCE));
}

mod redis_rs_cluster {
    hermes_testkit::conformance_suite!(super::RedisHarness(super::CLUSTER));
}

mod fred_cluster {
    hermes_testkit::conformance_suite!(super::RedisHarness(super::FRED_CLUSTER));
}

mod redis_rs_immediate_acks {
    hermes_testkit::conformance_suite!(super::RedisHarness(super::IMMEDIATE_ACKS));
}

mod redis_rs_sealed {
    hermes_testkit::serializer_suite!(hermes_testkit::suite::SerializedHarness::sealing(
        super::RedisHarness(super::Setup::REDIS_RS)
    ));
}

mod fred_sealed {
    hermes_testkit::serializer_suite!(hermes_testkit::suite::SerializedHarness::sealing(
        super::RedisHarness(super::Setup::FRED)
    ));
}

mod cluster_sealed {
    hermes_testkit::serializer_suite!(hermes_testkit::suite::SerializedHarness::sealing(
        super::RedisHarness(super::CLUSTER)
    ));
}

mod redis_rs_wrapped {
    hermes_testkit::wrapped_facet_suite!(super::RedisHarness(super::Setup::REDIS_RS));
}

mod fred_wrapped {
    hermes_testkit::wrapped_facet_suite!(super::RedisHarness(super::Setup::FRED));
}
