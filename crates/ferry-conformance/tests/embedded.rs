//! The conformance suite on the embedded broker.

use ferry_conformance::{Restart, Target};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_broker_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let target = Target::new("embedded", format!("embedded:{}", dir.path().display()))
        .restart(Restart::Reconnect);
    let report = ferry_conformance::run(&target).await;
    report.print();
    report.assert_passed();
    // The embedded broker supports every feature and the harness restarts it.
    report.assert_skipped_exactly(&[]);
}
