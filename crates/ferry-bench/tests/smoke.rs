//! Every shipped workload, at a tiny scale, against the embedded broker and Redis: the
//! reports are written, every figure is there, and every message is accounted for.
//! Redis is `FERRY_REDIS_URL` or the machine's server; when it does not answer the test
//! runs on the embedded broker alone and says so loudly — and fails instead under `CI=true`.

use std::path::Path;
use std::time::Duration;

use ferry::{ConsumerOptions, Ferry, Source};
use ferry_bench::driver::Outcome;
use ferry_bench::{Plan, Target};
use serde_json::Value;

const DEFAULT_REDIS: &str = "redis://127.0.0.1:6379/0";

/// The Redis target, or `None` (said loudly: the run is then on the embedded broker only)
/// when no Redis answers outside CI.
fn redis_target() -> Option<Target> {
    let url = ferry_testkit::url_or_skip("Redis", "FERRY_REDIS_URL", DEFAULT_REDIS)?;
    Some(Target::parse(&format!("redis-default={url}")).unwrap())
}

fn workloads_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/workloads")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_workload_runs_and_accounts_for_every_message() {
    let data = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut targets =
        vec![Target::parse(&format!("embedded=embedded:{}", data.path().display())).unwrap()];
    targets.extend(redis_target());
    let plan = Plan {
        workloads_dir: workloads_dir(),
        targets: targets.clone(),
        scale: 0.004,
        only: Vec::new(),
        out: out.path().to_path_buf(),
        baseline: Some("embedded".into()),
        fsync_probe: Duration::from_millis(100),
    };
    let results = ferry_bench::run(&plan).await.unwrap();
    assert_everything_declared_was_deleted(&results, &targets).await;

    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("results.json")).unwrap())
            .unwrap();
    assert!(json["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(json["machine"]["fdatasync_per_sec"].as_f64().unwrap() > 0.0);
    let markdown = std::fs::read_to_string(out.path().join("results.md")).unwrap();
    let workloads = json["workloads"].as_array().unwrap();
    assert_eq!(workloads.len(), 7);

    for w in workloads {
        let name = w["workload"]["name"].as_str().unwrap();
        let fraction = w["workload"]["nack_fraction"].as_f64().unwrap();
        let consumers = w["workload"]["consumers"].as_u64().unwrap()
            * w["workload"]["subscriptions"].as_u64().unwrap_or(1);
        assert!(
            markdown.contains(&format!("## {name}\n")),
            "{name} in results.md"
        );
        let results = w["targets"].as_array().unwrap();
        assert_eq!(results.len(), targets.len(), "{name}");
        for (t, target) in results.iter().zip(&targets) {
            let at = format!("{name} on {}", target.name);
            assert_eq!(t["target"], target.name.as_str(), "{at}");
            assert!(
                markdown.contains(&format!("| {} |", target.name)),
                "{at} in results.md"
            );
            assert_eq!(t["status"], "ran", "{at}: {}", t["reason"]);
            let f = &t["figures"];
            // A live run at this size measures a window of a fraction of a second, which a
            // producer held by the backlog bound (ten subscriptions draining its first
            // batches) can spend waiting: there the window may count no publish, and the
            // run's counts below show every message was still published and acked.
            let live = w["workload"]["mode"] == "live";
            for side in ["publish", "consume"] {
                let rate = f[side]["msgs_per_sec"].as_f64().unwrap();
                let mb = f[side]["mb_per_sec"].as_f64().unwrap();
                if live {
                    assert!(rate >= 0.0 && mb >= 0.0, "{at} {side}");
                } else {
                    assert!(rate > 0.0 && mb > 0.0, "{at} {side}");
                }
            }
            let window_published = f["publish"]["msgs_per_sec"].as_f64().unwrap() > 0.0;
            for latency in ["publish_latency", "end_to_end_latency"] {
                let p = &f[latency];
                if live && latency == "publish_latency" && !window_published {
                    // Latencies are recorded for the window's publish calls only.
                    assert!(p.is_null(), "{at} {latency}");
                    continue;
                }
                assert!(p["count"].as_u64().unwrap() > 0, "{at} {latency}");
                assert!(
                    p["p50_ms"].as_f64().unwrap() <= p["max_ms"].as_f64().unwrap(),
                    "{at} {latency}"
                );
            }
            let c = &f["counts"];
            let published = c["published"].as_u64().unwrap();
            assert!(published > 0, "{at}");
            assert_eq!(c["acked"], c["expected_acks"], "{at}: every message acked");
            assert_eq!(
                c["nacked"], c["redelivered"],
                "{at}: every nack redelivered"
            );
            // Each consumer nacks exactly its share, rounded down.
            let nacked = c["nacked"].as_u64().unwrap() as f64;
            let share = published as f64 * fraction;
            assert!(
                nacked <= share + 1.0 && nacked + consumers as f64 >= share,
                "{at}: {nacked} nacked of {published} at {fraction}"
            );
            if target.name == "embedded" {
                // The in-process broker is sampled as this process (CPU time is counted in
                // clock ticks, so a tiny run may show none; memory never).
                let server = &f["server"];
                assert!(server["cpu_secs"].as_f64().unwrap() >= 0.0, "{at}");
                assert!(server["peak_rss_mib"].as_f64().unwrap() > 0.0, "{at}");
            }
            let live = w["workload"]["mode"] == "live";
            assert_eq!(
                f["max_backlog"].is_u64(),
                live,
                "{at}: a backlog bound for live runs"
            );
        }
        for chart in [
            format!("throughput-{name}.svg"),
            format!("latency-{name}.svg"),
        ] {
            let svg = std::fs::read_to_string(out.path().join(&chart)).unwrap();
            assert!(
                svg.starts_with("<svg") || svg.starts_with("<?xml"),
                "{chart} is not SVG"
            );
            assert!(svg.trim_end().ends_with("</svg>"), "{chart} is cut short");
            for target in &targets {
                assert!(svg.contains(&target.name), "{chart} names {}", target.name);
            }
        }
    }
}

/// Every queue, topic and subscription a run declared is gone afterwards.
async fn assert_everything_declared_was_deleted(
    results: &ferry_bench::Results,
    targets: &[Target],
) {
    for target in targets {
        let ferry = Ferry::connect(&target.url).await.unwrap();
        for w in &results.workloads {
            for t in w.targets.iter().filter(|t| t.target == target.name) {
                let Outcome::Ran(f) = &t.outcome else {
                    continue;
                };
                let sources = if f.subscriptions.is_empty() {
                    vec![Source::queue(&f.destination)]
                } else {
                    f.subscriptions
                        .iter()
                        .map(|s| Source::subscription(&f.destination, s))
                        .collect()
                };
                for source in sources {
                    let opened = ferry
                        .consumer(source.clone(), ConsumerOptions::default())
                        .await;
                    assert!(
                        matches!(opened, Err(ferry::Error::NotFound { .. })),
                        "{} on {}: {source} is still there",
                        w.workload.name,
                        target.name
                    );
                }
            }
        }
        ferry.close().await.unwrap();
    }
}

#[tokio::test]
async fn an_unknown_workload_is_an_error_before_anything_runs() {
    let out = tempfile::tempdir().unwrap();
    let plan = Plan {
        workloads_dir: workloads_dir(),
        targets: vec![Target::parse("embedded=embedded:/nonexistent/never-made").unwrap()],
        scale: 1.0,
        only: vec!["no-such-workload".into()],
        out: out.path().to_path_buf(),
        baseline: None,
        fsync_probe: Duration::from_millis(10),
    };
    let err = ferry_bench::run(&plan).await.unwrap_err().to_string();
    assert!(err.contains("no-such-workload"), "{err}");
}
