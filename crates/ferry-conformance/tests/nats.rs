//! The conformance suite on the machine's NATS JetStream (`FERRY_NATS_URL`, else
//! nats://127.0.0.1:4222).

use std::time::Instant;

use futures_util::StreamExt;

use ferry_conformance::{Restart, Target};
use ferry_testkit::url_or_skip;

const RESTART: &str =
    "the machine's NATS JetStream service is shared; this suite does not restart it";

/// Every check this transport skips, and why: the feature its capability table says No to
/// (or the restart the harness does not do). Any other skip, or one of these passing,
/// fails the test.
const SKIPPED: &[(&str, &str)] = &[
    (
        "higher_priorities_are_delivered_first",
        "NATS JetStream declares no priorities",
    ),
    (
        "a_priority_above_the_queues_levels_is_invalid_and_stores_nothing",
        "NATS JetStream declares no priorities",
    ),
    (
        "an_expired_message_is_dead_lettered_not_delivered",
        "NATS JetStream declares no message TTL",
    ),
    (
        "a_default_ttl_applies_only_to_messages_without_one",
        "NATS JetStream declares no message TTL",
    ),
    (
        "per_key_order_holds_under_concurrency",
        "NATS JetStream declares no ordering keys",
    ),
    (
        "nothing_acked_or_published_is_lost_across_an_engine_restart",
        RESTART,
    ),
    (
        "settling_a_lease_taken_over_is_not_held",
        "NATS JetStream declares no stale settles refused",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_jetstream_passes_the_conformance_suite() {
    let Some(url) = url_or_skip("NATS JetStream", "FERRY_NATS_URL", "nats://127.0.0.1:4222") else {
        return;
    };
    let target = Target::new("NATS JetStream", url).restart(Restart::Cannot(RESTART));
    let started = Instant::now();
    let started_ms = ferry::message::now_ms();
    let report = ferry_conformance::run(&target).await;
    report.print();
    eprintln!("suite took {:?}", started.elapsed());
    remove_what_the_suite_declared(&target.url, started_ms).await;
    report.assert_passed();
    report.assert_skipped_exactly(SKIPPED);
}

/// Deletes the streams of the queues, topics and dead letters this run declared: the
/// suite's names are `cf-<ms since the epoch>-...`, so those from `started_ms` on are ours
/// (and no other run's, as runs on one machine do not overlap within a millisecond's name).
async fn remove_what_the_suite_declared(url: &str, started_ms: i64) {
    let client = async_nats::connect(url).await.expect("connect to clean up");
    let js = async_nats::jetstream::new(client);
    let mut names = js.stream_names();
    let mut ours = Vec::new();
    while let Some(name) = names.next().await {
        let name = name.expect("list streams");
        let Some(rest) = name.strip_prefix("ferry_") else {
            continue;
        };
        let Some((_, escaped)) = rest.split_once('_') else {
            continue;
        };
        let created_ms = escaped
            .strip_prefix("cf-")
            .and_then(|r| r.split('-').next())
            .and_then(|ms| ms.parse::<i64>().ok());
        if created_ms.is_some_and(|ms| ms >= started_ms) {
            ours.push(name);
        }
    }
    for name in ours {
        let _ = js.delete_stream(&name).await;
    }
}
