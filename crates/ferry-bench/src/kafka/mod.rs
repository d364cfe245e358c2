//! `ferry-bench kafka`: one `ferry serve`, its Kafka endpoint driven by librdkafka's own
//! benchmark (`rdkafka_performance`) and its gRPC API by `ferry-client`, side by side in
//! one run, reported as Kafka / Ferry ratios.
//!
//! For each message size, each round, on topics created alike (the partitions asked for,
//! `Fsync` durability):
//!
//! | step | Kafka: `rdkafka_performance` | Ferry: `ferry-client` over gRPC |
//! |---|---|---|
//! | produce | `-P -a -1` (acks=all): `batch.num.messages` B, `max.in.flight` W | `PublishToTopic` of B to one partition, W calls in flight |
//! | fetch | `-C -o beginning`, every partition | `ReadTopic` from offset 0, one reader per partition |
//!
//! Each side produces `messages` into its own fresh topic; then both fetch the records the
//! Kafka side produced (the same records). The order alternates round by round, so drift in
//! the machine's load falls on both. The figures are rdkafka_performance's own (its last
//! summary line) and, on Ferry's side, payload bytes and messages over the same span as
//! rdkafka_performance measures: a produce from the first call to the last answer, a
//! fetch from the first record received to the last. A ratio is the median of the Kafka
//! runs over the median of the Ferry runs; the target is **≥ 0.7** for produce and for
//! fetch.

mod native;
pub mod perf_output;
mod rdkafka;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use ferry_client::{Client, proto};
use serde::Serialize;

use crate::process::{Usage, Watch};

/// Kafka's figure over Ferry's, at least, for produce and for fetch.
pub const TARGET: f64 = 0.7;

/// Records one `ReadTopic` asks for: the server's most (the Kafka fetch's too).
const READ_RECORDS: u32 = 10_000;

/// What one invocation runs.
#[derive(Debug, Clone)]
pub struct KafkaPlan {
    /// The Kafka endpoint, `host:port`.
    pub bootstrap: String,
    /// The same server's gRPC API, `ferry://host:port`.
    pub grpc_url: String,
    /// The server process, sampled for CPU seconds.
    pub pid: Option<u32>,
    /// The `rdkafka_performance` binary.
    pub tool: PathBuf,
    /// Messages per run.
    pub messages: u64,
    /// Payload sizes, each its own table.
    pub sizes: Vec<usize>,
    pub partitions: u32,
    /// Records per produce request or call.
    pub batch: usize,
    /// Produce requests or calls awaiting their answer, at most.
    pub in_flight: usize,
    /// Runs per side, step and size, alternating which goes first.
    pub rounds: u32,
    /// How long one run may take.
    pub timeout: Duration,
}

/// The side a run is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Kafka,
    Ferry,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Kafka => "kafka (rdkafka_performance)",
            Side::Ferry => "ferry grpc (ferry-client)",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    Produce,
    Fetch,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub size: usize,
    pub round: u32,
    pub side: Side,
    pub step: Step,
    pub messages: u64,
    pub msgs_per_sec: f64,
    /// 10^6 payload bytes per second.
    pub mb_per_sec: f64,
    /// The server process's CPU over the run.
    pub server: Option<Usage>,
}

/// Medians of one size and step, and their ratio.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub size: usize,
    pub step: Step,
    pub kafka_msgs_per_sec: f64,
    pub ferry_msgs_per_sec: f64,
    pub kafka_mb_per_sec: f64,
    pub ferry_mb_per_sec: f64,
    /// Kafka's median msgs/s over Ferry's.
    pub ratio: f64,
    pub met: bool,
}

/// Every run and the ratios.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub messages: u64,
    pub partitions: u32,
    pub batch: usize,
    pub in_flight: usize,
    pub rounds: u32,
    pub runs: Vec<Run>,
    pub ratios: Vec<Ratio>,
}

impl Report {
    pub fn all_met(&self) -> bool {
        self.ratios.iter().all(|r| r.met)
    }
}

/// Runs the plan: for each size, `rounds` rounds of produce then fetch on each side.
pub async fn run(plan: &KafkaPlan) -> anyhow::Result<Report> {
    if plan.messages == 0 || plan.rounds == 0 || plan.partitions == 0 {
        bail!("messages, rounds and partitions must be at least 1");
    }
    if plan.batch == 0 || plan.in_flight == 0 {
        bail!("--batch and --in-flight must be at least 1");
    }
    if plan.sizes.is_empty() || plan.sizes.contains(&0) {
        bail!("give at least one --size, each at least 1 byte");
    }
    let client = Client::connect(&plan.grpc_url)
        .await
        .with_context(|| format!("connect to {}", plan.grpc_url))?;
    let mut runs = Vec::new();
    for &size in &plan.sizes {
        for round in 1..=plan.rounds {
            let order = if round % 2 == 1 {
                [Side::Kafka, Side::Ferry]
            } else {
                [Side::Ferry, Side::Kafka]
            };
            let topic =
                |side: Side| format!("bench-{size}-{round}-{side:?}-{}", std::process::id());
            for side in order {
                create_topic(&client, &topic(side), plan.partitions).await?;
            }
            for side in order {
                let r = produce(plan, &client, &topic(side), side, size, round).await?;
                report_progress(&r);
                runs.push(r);
                stored(&client, &topic(side), plan.messages).await?;
            }
            for side in order {
                let r = fetch(plan, &client, &topic(Side::Kafka), side, size, round).await?;
                report_progress(&r);
                runs.push(r);
            }
            for side in order {
                client.delete_topic(&topic(side)).await?;
            }
        }
    }
    let mut ratios = Vec::new();
    for &size in &plan.sizes {
        for step in [Step::Produce, Step::Fetch] {
            let median_of = |side: Side, f: fn(&Run) -> f64| {
                median(
                    runs.iter()
                        .filter(|r| r.size == size && r.step == step && r.side == side)
                        .map(f)
                        .collect(),
                )
            };
            let kafka = median_of(Side::Kafka, |r| r.msgs_per_sec);
            let ferry = median_of(Side::Ferry, |r| r.msgs_per_sec);
            let ratio = kafka / ferry;
            ratios.push(Ratio {
                size,
                step,
                kafka_msgs_per_sec: kafka,
                ferry_msgs_per_sec: ferry,
                kafka_mb_per_sec: median_of(Side::Kafka, |r| r.mb_per_sec),
                ferry_mb_per_sec: median_of(Side::Ferry, |r| r.mb_per_sec),
                ratio,
                met: ratio >= TARGET,
            });
        }
    }
    Ok(Report {
        messages: plan.messages,
        partitions: plan.partitions,
        batch: plan.batch,
        in_flight: plan.in_flight,
        rounds: plan.rounds,
        runs,
        ratios,
    })
}

fn report_progress(r: &Run) {
    eprintln!(
        "{} B round {}: {:?} {}: {:.0} msgs/s, {:.2} MB/s",
        r.size,
        r.round,
        r.step,
        r.side.name(),
        r.msgs_per_sec,
        r.mb_per_sec
    );
}

/// The median of a non-empty list (the mean of the middle two for an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

async fn create_topic(client: &Client, name: &str, partitions: u32) -> anyhow::Result<()> {
    let spec = proto::TopicSpec {
        partitions,
        // acks=all on a single node: answered once on disk, as a Ferry publish is.
        durability: proto::Durability::Fsync as i32,
        ..Default::default()
    };
    client
        .create_topic(name, spec)
        .await
        .with_context(|| format!("create topic {name}"))
}

/// Checks that `topic` holds `expected` records, so a side cannot be fast by storing less.
async fn stored(client: &Client, topic: &str, expected: u64) -> anyhow::Result<()> {
    let info = client.describe_topic(topic).await?;
    let records: u64 = info
        .partitions
        .iter()
        .map(|p| p.end_offset - p.start_offset)
        .sum();
    if records != expected {
        bail!("topic {topic} holds {records} records after a produce of {expected}");
    }
    Ok(())
}

async fn produce(
    plan: &KafkaPlan,
    client: &Client,
    topic: &str,
    side: Side,
    size: usize,
    round: u32,
) -> anyhow::Result<Run> {
    let watch = plan.pid.and_then(|pid| Watch::start(pid).ok());
    let (msgs_per_sec, mb_per_sec) = match side {
        Side::Kafka => {
            let (p, _) = rdkafka::produce(
                &invocation(plan, topic),
                rdkafka::ProducerSettings {
                    size,
                    batch: plan.batch,
                    in_flight: plan.in_flight,
                },
            )
            .await?;
            (p.msgs_per_sec, p.mb_per_sec)
        }
        Side::Ferry => {
            let m = native::produce(
                client,
                topic,
                plan.partitions,
                plan.messages,
                size,
                plan.batch,
                plan.in_flight,
            )
            .await?;
            (m.msgs_per_sec(), m.mb_per_sec())
        }
    };
    Ok(Run {
        size,
        round,
        side,
        step: Step::Produce,
        messages: plan.messages,
        msgs_per_sec,
        mb_per_sec,
        server: watch.map(|w| w.finish()),
    })
}

async fn fetch(
    plan: &KafkaPlan,
    client: &Client,
    topic: &str,
    side: Side,
    size: usize,
    round: u32,
) -> anyhow::Result<Run> {
    let watch = plan.pid.and_then(|pid| Watch::start(pid).ok());
    let (msgs_per_sec, mb_per_sec) = match side {
        Side::Kafka => {
            let (c, _) = rdkafka::fetch(&invocation(plan, topic)).await?;
            (c.msgs_per_sec, c.mb_per_sec)
        }
        Side::Ferry => {
            let m =
                native::fetch(client, topic, plan.partitions, plan.messages, READ_RECORDS).await?;
            (m.msgs_per_sec(), m.mb_per_sec())
        }
    };
    Ok(Run {
        size,
        round,
        side,
        step: Step::Fetch,
        messages: plan.messages,
        msgs_per_sec,
        mb_per_sec,
        server: watch.map(|w| w.finish()),
    })
}

fn invocation<'a>(plan: &'a KafkaPlan, topic: &'a str) -> rdkafka::Invocation<'a> {
    rdkafka::Invocation {
        tool: &plan.tool,
        bootstrap: &plan.bootstrap,
        topic,
        partitions: plan.partitions,
        messages: plan.messages,
        timeout: plan.timeout,
    }
}

/// The report as markdown: each run, then the medians and ratios.
pub fn markdown(report: &Report) -> String {
    let mut md = format!(
        "{} messages per run, {} partition(s), produce batches of {} with {} in flight, \
         {} rounds\n\n",
        report.messages, report.partitions, report.batch, report.in_flight, report.rounds
    );
    md.push_str(
        "| size | round | step | side | msgs/s | MB/s | server CPU µs/msg |\n\
         |---:|---:|---|---|---:|---:|---:|\n",
    );
    for r in &report.runs {
        let cpu = r
            .server
            .map(|u| format!("{:.1}", u.cpu_secs * 1e6 / r.messages as f64))
            .unwrap_or_else(|| "–".into());
        md.push_str(&format!(
            "| {} B | {} | {:?} | {} | {:.0} | {:.2} | {} |\n",
            r.size,
            r.round,
            r.step,
            r.side.name(),
            r.msgs_per_sec,
            r.mb_per_sec,
            cpu
        ));
    }
    md.push_str(
        "\n| size | step | Kafka msgs/s (MB/s) | Ferry gRPC msgs/s (MB/s) | Kafka / Ferry | target | met? |\n\
         |---:|---|---:|---:|---:|---|---|\n",
    );
    for r in &report.ratios {
        md.push_str(&format!(
            "| {} B | {:?} | {:.0} ({:.2}) | {:.0} ({:.2}) | **{:.3}** | ≥ {TARGET} | {} |\n",
            r.size,
            r.step,
            r.kafka_msgs_per_sec,
            r.kafka_mb_per_sec,
            r.ferry_msgs_per_sec,
            r.ferry_mb_per_sec,
            r.ratio,
            if r.met { "yes" } else { "MISSED" }
        ));
    }
    md
}

/// Writes `kafka.json` and `kafka.md` into `out`.
pub fn write(report: &Report, out: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
    std::fs::write(out.join("kafka.json"), serde_json::to_vec_pretty(report)?)?;
    let md = out.join("kafka.md");
    std::fs::write(&md, markdown(report))?;
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
    }
}
