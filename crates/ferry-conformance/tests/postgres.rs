//! The conformance suite on PostgreSQL (`FERRY_POSTGRES_URL`, by default the machine's
//! server with trust auth).

use std::time::Instant;

use ferry_conformance::{Restart, Target};
use ferry_testkit::url_or_skip;

const RESTART: &str = "the machine's PostgreSQL service is shared; this suite does not restart it";

/// Every check this transport skips, and why: only the restart the harness does not do,
/// as the capability table says No to nothing. Any other skip fails the test.
const SKIPPED: &[(&str, &str)] = &[(
    "nothing_acked_or_published_is_lost_across_an_engine_restart",
    RESTART,
)];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_passes_the_conformance_suite() {
    let Some(url) = url_or_skip(
        "PostgreSQL",
        "FERRY_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    ) else {
        return;
    };
    let target = Target::new("PostgreSQL", url).restart(Restart::Cannot(RESTART));
    let started = Instant::now();
    let report = ferry_conformance::run(&target).await;
    report.print();
    eprintln!("suite took {:?}", started.elapsed());
    report.assert_passed();
    report.assert_skipped_exactly(SKIPPED);
}
