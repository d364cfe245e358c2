//! The conformance suite on PostgreSQL (`FERRY_POSTGRES_URL`, by default the machine's
//! server with trust auth).

use std::collections::BTreeSet;
use std::time::Instant;

use ferry::{Feature, Support};
use ferry_conformance::{Restart, Target};
use ferry_testkit::url_or_skip;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_passes_the_conformance_suite() {
    let Some(url) = url_or_skip(
        "PostgreSQL",
        "FERRY_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    ) else {
        return;
    };
    let target = Target::new("PostgreSQL", url).restart(Restart::Cannot(
        "the machine's PostgreSQL service is shared; this suite does not restart it",
    ));
    let started = Instant::now();
    let report = ferry_conformance::run(&target).await;
    report.print();
    eprintln!("suite took {:?}", started.elapsed());
    report.assert_passed();

    // A skip must come from the table (or the restart the harness cannot do), never hide a
    // failure: the skipped checks are exactly the restart and those whose reason is a
    // feature the table says No to (today only temporary queues, which no check needs).
    let caps = ferry::transport::postgres_capabilities();
    let missing: Vec<Feature> = Feature::ALL
        .into_iter()
        .filter(|f| matches!(caps.support(*f), Support::No(_)))
        .collect();
    let skipped: BTreeSet<&str> = report.skipped().into_iter().map(|(n, _)| n).collect();
    let mut expected: BTreeSet<&str> =
        BTreeSet::from(["nothing_acked_or_published_is_lost_across_an_engine_restart"]);
    for (name, why) in report.skipped() {
        if missing
            .iter()
            .any(|f| why.ends_with(&format!("declares no {f}")))
        {
            expected.insert(name);
        }
    }
    assert_eq!(skipped, expected, "skipped checks differ from the table");
}
