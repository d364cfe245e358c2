//! The conformance suite on the machine's NATS JetStream (`FERRY_NATS_URL`, else
//! nats://127.0.0.1:4222).

use std::time::Instant;

use futures_util::StreamExt;

use ferry::{Feature, Support};
use ferry_conformance::{Restart, Target};
use ferry_testkit::url_or_skip;

/// The checks that need each feature, as the suite declares them: a check may be skipped
/// only when the table says No to one of its features.
const NEEDS: &[(&str, &[Feature])] = &[
    (
        "competing_consumers_get_each_message_once",
        &[Feature::CompetingConsumers],
    ),
    (
        "fan_out_gives_every_subscription_everything",
        &[Feature::FanOut],
    ),
    (
        "nack_redelivers_with_a_rising_attempt",
        &[Feature::Redelivery],
    ),
    (
        "max_deliveries_dead_letters_with_metadata",
        &[Feature::Redelivery, Feature::DeadLetters],
    ),
    ("reject_dead_letters_at_once", &[Feature::DeadLetters]),
    (
        "an_expired_lease_goes_to_another_consumer",
        &[Feature::LeaseExpiry],
    ),
    ("extend_keeps_a_delivery_hidden", &[Feature::LeaseExtension]),
    ("a_delay_is_not_delivered_early", &[Feature::Delays]),
    (
        "per_key_order_holds_under_concurrency",
        &[Feature::OrderingKeys],
    ),
    (
        "duplicates_within_the_window_are_stored_once",
        &[Feature::Deduplication],
    ),
    (
        "deleting_a_topic_with_subscriptions_is_a_conflict",
        &[Feature::FanOut],
    ),
    (
        "settling_a_lease_taken_over_is_not_held",
        &[Feature::LeaseExpiry, Feature::StaleSettles],
    ),
    ("a_full_queue_refuses_with_full", &[Feature::MaxLength]),
];

const RESTART: &str = "nothing_acked_or_published_is_lost_across_an_engine_restart";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_jetstream_passes_the_conformance_suite() {
    let Some(url) = url_or_skip("NATS JetStream", "FERRY_NATS_URL", "nats://127.0.0.1:4222") else {
        return;
    };
    let target = Target::new("NATS JetStream", url).restart(Restart::Cannot(
        "the machine's NATS JetStream service is shared; this suite does not restart it",
    ));
    let started = Instant::now();
    let started_ms = ferry::message::now_ms();
    let report = ferry_conformance::run(&target).await;
    report.print();
    eprintln!("suite took {:?}", started.elapsed());
    remove_what_the_suite_declared(&target.url, started_ms).await;
    report.assert_passed();

    let table = ferry::transport::nats_capabilities();
    let mut expected: Vec<&str> = NEEDS
        .iter()
        .filter(|(_, needs)| needs.iter().any(|f| !table.supports(*f)))
        .map(|(name, _)| *name)
        .collect();
    expected.push(RESTART);
    expected.sort();
    let mut skipped: Vec<&str> = report.skipped().iter().map(|(name, _)| *name).collect();
    skipped.sort();
    assert_eq!(
        skipped, expected,
        "the skipped checks must be exactly those the table says No to (and the restart)"
    );
    // The table's No entries are the features these skips stand for.
    for feature in [
        Feature::Priorities,
        Feature::OrderingKeys,
        Feature::Ttl,
        Feature::StaleSettles,
    ] {
        assert!(
            matches!(table.support(feature), Support::No(_)),
            "{feature} changed in the table: update this test"
        );
    }
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
