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

/// The flow-control and tracking scenarios with the limits, pauses, cancellations, records and
/// groups on PostgreSQL.
mod with_postgres_store {
    hermes_testkit::store_suite!(hermes_testkit::suite::StoreHarness::new(
        super::common::SqsHarness,
        |queue| async move {
            let postgres = std::env::var("HERMES_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
            hermes_postgres::PostgresDriver::from_url(&format!(
                "{postgres}?queue={queue}&schema=hermes_sqs_store&migrate=true"
            ))
            .await
        },
    ));
}
