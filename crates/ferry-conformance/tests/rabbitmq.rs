//! The conformance suite on RabbitMQ (the machine's service, or `FERRY_AMQP_URL`).

use std::time::Instant;

use ferry::Feature;
use ferry_conformance::{Restart, Target};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_passes_the_conformance_suite() {
    let Some(url) = ferry_testkit::url_or_skip(
        "RabbitMQ",
        "FERRY_AMQP_URL",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
    ) else {
        return;
    };
    let target = Target::new("RabbitMQ", url).restart(Restart::Cannot(
        "the machine's RabbitMQ service is shared; this suite does not restart it",
    ));
    let started = Instant::now();
    let report = ferry_conformance::run(&target).await;
    report.print();
    eprintln!("suite took {:?}", started.elapsed());
    report.assert_passed();

    // A skip must come from the table (or the restart the harness cannot do), never hide
    // a failure.
    let caps = ferry::transport::rabbitmq_capabilities();
    let mut skipped: Vec<&str> = report.skipped().iter().map(|(name, _)| *name).collect();
    skipped.sort();
    let mut expected = vec!["nothing_acked_or_published_is_lost_across_an_engine_restart"];
    for (check, feature) in [
        (
            "per_key_order_holds_under_concurrency",
            Feature::OrderingKeys,
        ),
        (
            "duplicates_within_the_window_are_stored_once",
            Feature::Deduplication,
        ),
    ] {
        assert!(!caps.supports(feature), "{feature} is supported now");
        expected.push(check);
    }
    expected.sort();
    assert_eq!(skipped, expected);
    for feature in Feature::ALL {
        let refused = matches!(
            feature,
            Feature::Priorities | Feature::OrderingKeys | Feature::Deduplication
        );
        assert_eq!(caps.supports(feature), !refused, "{feature}");
    }
}
