//! Three processes, each running a scheduler with the same 1-second entry on one queue
//! directory, queue exactly one message per tick over ten ticks.

use hermes_fs::FileSystemDriver;
use hermes_testkit::scheduler_processes::three_scheduler_processes_emit_one_message_per_tick;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_scheduler_processes_on_one_directory() {
    let dir = std::env::temp_dir().join(format!(
        "hermes-fs-schedulers-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    three_scheduler_processes_emit_one_message_per_tick(
        "three_scheduler_processes_on_one_directory",
        dir.to_str().expect("a UTF-8 path"),
        |dir| async move {
            FileSystemDriver::from_url(&format!("file://{dir}?queue=jobs")).expect("a queue")
        },
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}
