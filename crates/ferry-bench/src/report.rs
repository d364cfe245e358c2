//! `results.json` (every figure, with the machine it was measured on) and `results.md` (a
//! table per workload, with each target's ratio to the baseline target).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde_json::{Value, json};

use crate::driver::{Figures, Outcome};
use crate::figures;
use crate::stats::Percentiles;
use crate::{Results, TargetResult};

/// One line for the progress log.
pub fn brief(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Ran(f) => format!(
            "publish {} msgs/s, consume {} msgs/s, end-to-end p99 {} ms",
            num(f.publish.msgs_per_sec),
            num(f.consume.msgs_per_sec),
            f.end_to_end_latency.map_or("-".into(), |p| ms(p.p99_ms))
        ),
        Outcome::Skipped(why) => format!("skipped: {why}"),
        Outcome::Failed(why) => format!("FAILED: {why}"),
    }
}

pub fn write(results: &Results, out: &Path) -> anyhow::Result<()> {
    let json_path = out.join("results.json");
    let text = serde_json::to_string_pretty(&json(results)).expect("JSON of plain values");
    std::fs::write(&json_path, text + "\n")
        .with_context(|| format!("write {}", json_path.display()))?;
    let md_path = out.join("results.md");
    std::fs::write(&md_path, markdown(results))
        .with_context(|| format!("write {}", md_path.display()))?;
    Ok(())
}

pub fn json(results: &Results) -> Value {
    let workloads: Vec<Value> = results
        .workloads
        .iter()
        .map(|w| {
            let targets: Vec<Value> = w.targets.iter().map(target_json).collect();
            json!({ "workload": w.workload, "targets": targets })
        })
        .collect();
    json!({
        "machine": results.machine,
        "scale": results.scale,
        "baseline": results.baseline,
        "workloads": workloads,
    })
}

fn target_json(t: &TargetResult) -> Value {
    let (status, reason, figures) = match &t.outcome {
        Outcome::Ran(f) => ("ran", None, Some(f)),
        Outcome::Skipped(why) => ("skipped", Some(why), None),
        Outcome::Failed(why) => ("failed", Some(why), None),
    };
    json!({
        "target": t.target,
        "url": t.url,
        "status": status,
        "reason": reason,
        "figures": figures,
    })
}

pub fn markdown(results: &Results) -> String {
    let m = &results.machine;
    let mut md = String::from("# Ferry workload benchmark\n\n");
    let _ = writeln!(
        md,
        "Machine: {} cores ({}), {:.1} GiB memory, Linux {}, {} fdatasync/s (4 KiB appends) \
         on the output directory's file system, Ferry {}. Scale {}.\n",
        m.cores,
        m.cpu_model,
        m.memory_gib,
        m.kernel,
        m.fdatasync_per_sec.map_or("unmeasured".into(), num),
        m.ferry_revision.as_deref().unwrap_or("(revision unknown)"),
        results.scale
    );
    md.push_str(
        "Throughput is over the measured window (live) or the publish and drain phases \
         (backlog); consume counts acks over all subscriptions. Latencies in ms: publish is \
         per publish call until the engine's acknowledgement, end-to-end per first delivery \
         from its send time. CPU and peak RSS are the engine's server process tree (for \
         `embedded`, the bench process itself). In live runs producers pause while the \
         slowest subscription is more than a bounded backlog behind (`max_backlog` in \
         results.json), so a max-rate figure is the rate consumers sustain.\n",
    );
    if let Some(b) = &results.baseline {
        let _ = writeln!(
            md,
            "\nRatios are to `{b}`: above 1 is more throughput, or more latency, than `{b}`."
        );
    }
    for w in &results.workloads {
        let _ = writeln!(md, "\n## {}\n", w.workload.name);
        let mut header = vec![
            "target",
            "publish msgs/s",
            "publish MB/s",
            "consume msgs/s",
            "consume MB/s",
            "publish p50 / p99 / p99.9 / max",
            "end-to-end p50 / p99 / p99.9 / max",
            "server CPU s",
            "peak RSS MiB",
        ];
        if results.baseline.is_some() {
            header.extend(["publish ×", "consume ×", "end-to-end p99 ×"]);
        }
        let _ = writeln!(md, "| {} |", header.join(" | "));
        let _ = writeln!(
            md,
            "|---|{}",
            header[1..].iter().map(|_| "---:|").collect::<String>()
        );
        let baseline = results.baseline.as_ref().and_then(|b| {
            w.targets.iter().find_map(|t| match &t.outcome {
                Outcome::Ran(f) if &t.target == b => Some(f.as_ref()),
                _ => None,
            })
        });
        for t in &w.targets {
            match &t.outcome {
                Outcome::Ran(f) => {
                    let mut row = vec![
                        t.target.clone(),
                        num(f.publish.msgs_per_sec),
                        format!("{:.2}", f.publish.mb_per_sec),
                        num(f.consume.msgs_per_sec),
                        format!("{:.2}", f.consume.mb_per_sec),
                        percentiles(f.publish_latency),
                        percentiles(f.end_to_end_latency),
                        f.server
                            .map_or("-".into(), |u| format!("{:.2}", u.cpu_secs)),
                        f.server.map_or("-".into(), |u| {
                            let since = if u.peak_since_run_start {
                                ""
                            } else {
                                " (since start)"
                            };
                            format!("{:.0}{since}", u.peak_rss_mib)
                        }),
                    ];
                    if results.baseline.is_some() {
                        row.extend(ratios(f, baseline));
                    }
                    let _ = writeln!(md, "| {} |", row.join(" | "));
                }
                Outcome::Skipped(why) => {
                    let _ = writeln!(md, "| {} | skipped: {} |", t.target, why.replace('|', "/"));
                }
                Outcome::Failed(why) => {
                    let _ = writeln!(md, "| {} | FAILED: {} |", t.target, why.replace('|', "/"));
                }
            }
        }
    }
    md
}

fn ratios(f: &Figures, baseline: Option<&Figures>) -> [String; 3] {
    let ratio = |x: f64, b: f64| {
        if b > 0.0 {
            format!("{:.2}", x / b)
        } else {
            "-".into()
        }
    };
    let Some(b) = baseline else {
        return ["-".into(), "-".into(), "-".into()];
    };
    let p99 = |f: &Figures| f.end_to_end_latency.map(|p| p.p99_ms);
    [
        ratio(f.publish.msgs_per_sec, b.publish.msgs_per_sec),
        ratio(f.consume.msgs_per_sec, b.consume.msgs_per_sec),
        match (p99(f), p99(b)) {
            (Some(x), Some(y)) => ratio(x, y),
            _ => "-".into(),
        },
    ]
}

fn percentiles(p: Option<Percentiles>) -> String {
    p.map_or("-".into(), |p| {
        format!(
            "{} / {} / {} / {}",
            ms(p.p50_ms),
            ms(p.p99_ms),
            ms(p.p999_ms),
            ms(p.max_ms)
        )
    })
}

/// Milliseconds with three significant digits or so.
fn ms(v: f64) -> String {
    figures::three_digits(v)
}

/// A rate with thousands separated: 12 345.
pub fn num(v: f64) -> String {
    figures::grouped(v, ' ')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{Counts, Throughput};
    use crate::machine::Machine;
    use crate::workload::Workload;
    use crate::{Results, WorkloadResult};

    fn ran(msgs_per_sec: f64, p99_ms: f64) -> Outcome {
        let latency = Percentiles {
            count: 10,
            p50_ms: 1.0,
            p99_ms,
            p999_ms: p99_ms,
            max_ms: p99_ms,
        };
        Outcome::Ran(Box::new(Figures {
            destination: "q".into(),
            subscriptions: Vec::new(),
            publish_secs: 1.0,
            consume_secs: 1.0,
            publish: Throughput {
                msgs_per_sec,
                mb_per_sec: 1.0,
            },
            consume: Throughput {
                msgs_per_sec,
                mb_per_sec: 1.0,
            },
            publish_latency: Some(latency),
            end_to_end_latency: Some(latency),
            counts: Counts {
                published: 1,
                expected_acks: 1,
                acked: 1,
                nacked: 0,
                redelivered: 0,
            },
            max_backlog: None,
            server: None,
            end_to_end_curve: Vec::new(),
        }))
    }

    #[test]
    fn the_table_gives_ratios_to_the_baseline_and_reasons_for_skips() {
        let workload = Workload::parse(
            r#"
            name = "w"
            kind = "queue"
            message_size = 128
            keys = 0
            producers = 1
            batch = 1
            producer_rate = 0
            consumers = 1
            prefetch = 1
            ack = "each"
            mode = "live"
            duration_secs = 1
            "#,
        )
        .unwrap();
        let target = |name: &str, outcome| TargetResult {
            target: name.into(),
            url: "x".into(),
            outcome,
        };
        let results = Results {
            machine: Machine::probe(Path::new("/nonexistent"), std::time::Duration::ZERO),
            scale: 1.0,
            baseline: Some("base".into()),
            workloads: vec![WorkloadResult {
                workload,
                targets: vec![
                    target("base", ran(1000.0, 10.0)),
                    target("other", ran(500.0, 30.0)),
                    target(
                        "bare",
                        Outcome::Skipped("bare does not support fan-out".into()),
                    ),
                ],
            }],
        };
        let md = markdown(&results);
        assert!(md.contains("| base | 1 000 |"), "{md}");
        assert!(md.contains("| 1.00 | 1.00 | 1.00 |"), "{md}");
        assert!(md.contains("| other | 500 |"), "{md}");
        assert!(md.contains("| 0.50 | 0.50 | 3.00 |"), "{md}");
        assert!(
            md.contains("| bare | skipped: bare does not support fan-out |"),
            "{md}"
        );
        let json = json(&results);
        assert_eq!(json["workloads"][0]["targets"][2]["status"], "skipped");
        assert_eq!(
            json["workloads"][0]["targets"][1]["figures"]["publish"]["msgs_per_sec"],
            500.0
        );
    }

    #[test]
    fn rates_are_grouped_in_thousands() {
        assert_eq!(num(0.4), "0");
        assert_eq!(num(999.0), "999");
        assert_eq!(num(1234.0), "1 234");
        assert_eq!(num(1234567.0), "1 234 567");
    }
}
