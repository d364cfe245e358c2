//! A few seconds of the soak on the embedded broker: every message reaches the end its fate
//! gives (acked, or dead-lettered for the right reason), the samples are taken, and the
//! reports and charts are written. The long run is `ferry-bench soak`, on demand.

use std::time::Duration;

use ferry_bench::soak::SoakPlan;
use ferry_bench::soak::fate::{Fate, Mix};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_accounts_for_every_message_and_writes_its_reports() {
    let data = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let plan = SoakPlan {
        url: format!("embedded:{}", data.path().display()),
        pid: Some(std::process::id()),
        data_dir: Some(data.path().to_path_buf()),
        duration: Duration::from_secs(5),
        rate: 400,
        message_size: 64,
        workers: 2,
        prefetch: 16,
        // Heavier than the default mix, so a short run still dead-letters both ways.
        mix: Mix {
            retry_per_mille: 100,
            poison_per_mille: 30,
            reject_per_mille: 30,
        },
        sample_every: Duration::from_millis(500),
        drain_limit: Duration::from_secs(30),
        out: out.path().to_path_buf(),
    };
    let report = ferry_bench::soak::run(&plan).await.unwrap();
    let t = report.totals;
    assert!(t.published >= 1_000, "{t:?}");
    assert_eq!(t.lost, 0, "{t:?}");
    assert_eq!(t.misplaced, 0, "{t:?}");
    // What the fates of the published messages call for.
    let count = |fate: Fate| {
        (0..t.published)
            .filter(|n| plan.mix.fate(*n) == fate)
            .count() as u64
    };
    let (retry, poison, reject) = (
        count(Fate::RetryOnce),
        count(Fate::Poison),
        count(Fate::Reject),
    );
    assert!(poison > 0 && reject > 0 && retry > 0, "{t:?}");
    assert_eq!(t.expected_dead_letters, poison + reject, "{t:?}");
    assert_eq!(t.dead_lettered, poison + reject, "{t:?}");
    assert_eq!(t.acked + t.dead_lettered, t.published, "{t:?}");
    // Each retry-once message is nacked once and each poison one on all three deliveries.
    assert_eq!(t.nacked, retry + 3 * poison, "{t:?}");
    assert_eq!(t.rejected, reject, "{t:?}");
    assert_eq!(t.redelivered, retry + 2 * poison, "{t:?}");

    assert!(
        report.samples.len() >= 8,
        "{} samples",
        report.samples.len()
    );
    let last = report.samples.last().unwrap();
    assert!(last.resources.rss_mib > 0.0 && last.resources.open_files > 0);
    assert!(last.resources.disk_mib > 0.0, "{:?}", last.resources);
    assert!(report.samples.iter().any(|s| s.latency.is_some()));
    assert_eq!(report.growth.len(), 4);
    assert!(report.verdict().starts_with("soak: "));

    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("soak.json")).unwrap())
            .unwrap();
    assert_eq!(json["totals"]["lost"], 0);
    assert_eq!(
        json["samples"].as_array().unwrap().len(),
        report.samples.len()
    );
    let md = std::fs::read_to_string(out.path().join("soak.md")).unwrap();
    assert!(md.contains("| quantity |"), "{md}");
    for chart in ["soak-resources.svg", "soak-latency.svg"] {
        let svg = std::fs::read_to_string(out.path().join(chart)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{chart}"
        );
        assert!(svg.contains("<polyline"), "{chart} has no line");
    }
}
