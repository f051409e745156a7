//! The test the guide shows under "Testing your jobs" (it includes this file): what the code
//! under test queued, and what a handler makes of a job.

// ANCHOR: test
use hermes::{Dispatcher, Emitter, HandlerOutcome, Job};
use hermes_example::{ExportReport, Exporter};
use hermes_testkit::{MemoryDriver, perform_job};

#[tokio::test]
async fn an_export_is_queued_and_runs() {
    // What the code under test queued:
    let driver = MemoryDriver::new();
    Emitter::new(driver.clone())
        .emit_job(&ExportReport::new("sales"))
        .await
        .unwrap();
    assert_eq!(
        driver.queued_jobs::<ExportReport>(),
        [ExportReport::new("sales")]
    );

    // What its handler makes of it:
    let log = std::env::temp_dir().join(format!("exports-{}.log", std::process::id()));
    let mut dispatcher = Dispatcher::new(driver);
    dispatcher.register_job_handler(Exporter::new(&log));
    let report = perform_job(&dispatcher, &ExportReport::new("sales")).await;
    assert!(report.succeeded(), "{report:?}");
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .ends_with(" sales exported\n")
    );

    // A PHP message of the type that does not fit it fails for good, without a retry:
    let misfit = hermes::Message::builder(ExportReport::TYPE)
        .payload(&serde_json::json!({"report": 42}))
        .build()
        .unwrap();
    let report = dispatcher.perform(&misfit, ExportReport::PRIORITY).await;
    assert!(matches!(
        report.first_failure(),
        Some(HandlerOutcome::Rejected(_))
    ));
    assert!(report.retry.is_none());
    std::fs::remove_file(&log).ok();
}
// ANCHOR_END: test
