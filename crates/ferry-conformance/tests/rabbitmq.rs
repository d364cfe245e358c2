//! The conformance suite on RabbitMQ (the machine's service, or `FERRY_AMQP_URL`).

use std::time::Instant;

use ferry_conformance::{Restart, Target};

const RESTART: &str = "the machine's RabbitMQ service is shared; this suite does not restart it";

/// Every check this transport skips, and why: the feature its capability table says No to
/// (or the restart the harness does not do). Any other skip, or one of these passing,
/// fails the test.
const SKIPPED: &[(&str, &str)] = &[
    (
        "higher_priorities_are_delivered_first",
        "rabbitmq declares no priorities",
    ),
    (
        "a_priority_above_the_queues_levels_is_invalid_and_stores_nothing",
        "rabbitmq declares no priorities",
    ),
    (
        "per_key_order_holds_under_concurrency",
        "rabbitmq declares no ordering keys",
    ),
    (
        "duplicates_within_the_window_are_stored_once",
        "rabbitmq declares no deduplication",
    ),
    (
        "a_dedup_id_on_a_queue_without_a_window_is_invalid_and_stores_nothing",
        "rabbitmq declares no deduplication",
    ),
    (
        "nothing_acked_or_published_is_lost_across_an_engine_restart",
        RESTART,
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_passes_the_conformance_suite() {
    let Some(url) = ferry_testkit::url_or_skip(
        "RabbitMQ",
        "FERRY_AMQP_URL",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
    ) else {
        return;
    };
    let target = Target::new("RabbitMQ", url).restart(Restart::Cannot(RESTART));
    let started = Instant::now();
    let report = ferry_conformance::run(&target).await;
    report.print();
    eprintln!("suite took {:?}", started.elapsed());
    report.assert_failed_exactly(&[]);
    report.assert_skipped_exactly(SKIPPED);
}
