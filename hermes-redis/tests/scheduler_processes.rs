//! Three processes, each running a scheduler with the same 1-second entry on one Redis queue,
//! queue exactly one message per tick over ten ticks, with both client libraries.

mod common;

use hermes_redis::RedisSetDriver;
use hermes_testkit::scheduler_processes::three_scheduler_processes_emit_one_message_per_tick;

async fn run(test: &str, client: &str) {
    let key = format!("sched-{}-{:08x}", std::process::id(), rand::random::<u32>());
    three_scheduler_processes_emit_one_message_per_tick(test, &key, |key| async move {
        let url = format!(
            "{}/0?key={key}&schedule_key={key}_schedule&client={client}",
            common::redis_url()
        );
        RedisSetDriver::from_url(&url)
            .await
            .expect("Redis is running")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_scheduler_processes_on_the_redis_crate() {
    run("three_scheduler_processes_on_the_redis_crate", "redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_scheduler_processes_on_fred() {
    run("three_scheduler_processes_on_fred", "fred").await;
}
