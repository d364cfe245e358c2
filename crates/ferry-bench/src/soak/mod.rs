//! `ferry-bench soak`: a long run at a steady rate with retries and dead-letter traffic,
//! sampling the engine's memory, open files, disk and latency percentiles over time, and
//! judging at the end that every message reached its end and that nothing grew without
//! bound. Written as SVG charts, `soak.json` and `soak.md`.

pub mod fate;
pub mod growth;
pub mod report;
pub mod resources;
pub mod server;
pub mod traffic;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use ferry::{Backoff, DeliveryPolicy, Ferry, QueueDecl, Source};
use serde::Serialize;
use tokio::task::JoinSet;

use crate::stats::Percentiles;
use fate::Mix;
use growth::{Growth, Tolerance};
use resources::Resources;
use traffic::{Latencies, Tally};

/// What one soak runs.
#[derive(Debug, Clone)]
pub struct SoakPlan {
    /// The engine, as an SDK URL.
    pub url: String,
    /// The engine's process, sampled for memory and open files (this process for
    /// `embedded:` URLs).
    pub pid: Option<u32>,
    /// The engine's data directory, sampled for disk use.
    pub data_dir: Option<PathBuf>,
    pub duration: Duration,
    /// Messages per second published.
    pub rate: u64,
    pub message_size: usize,
    pub workers: u32,
    pub prefetch: usize,
    pub mix: Mix,
    pub sample_every: Duration,
    /// How long the final drain may go without a message reaching its end.
    pub drain_limit: Duration,
    pub out: PathBuf,
}

/// One sampling interval.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// Seconds since the traffic started, at the end of the interval.
    pub at_secs: f64,
    #[serde(flatten)]
    pub resources: Resources,
    /// End-to-end latency of the interval's first deliveries.
    pub latency: Option<Percentiles>,
    pub published: u64,
    pub ended: u64,
    pub dead_lettered: u64,
    /// Published and not yet at their end (in flight, in backoff, waiting).
    pub outstanding: u64,
}

/// Every message of the run, where it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub published: u64,
    pub acked: u64,
    pub dead_lettered: u64,
    /// Dead letters the fates called for.
    pub expected_dead_letters: u64,
    pub nacked: u64,
    pub rejected: u64,
    pub redelivered: u64,
    /// Published and never seen at an end.
    pub lost: u64,
    /// Dead letters that should not be there, or with the wrong reason.
    pub misplaced: u64,
}

/// The whole soak.
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    pub url: String,
    pub duration_secs: f64,
    pub rate: u64,
    pub message_size: usize,
    pub workers: u32,
    pub samples: Vec<Sample>,
    pub totals: Totals,
    pub latency: Option<Percentiles>,
    pub growth: Vec<Growth>,
    /// Nothing lost or misplaced, and nothing grew without bound.
    pub clean: bool,
}

impl SoakReport {
    /// One line for a terminal or a CI log.
    pub fn verdict(&self) -> String {
        let grew: Vec<&str> = self
            .growth
            .iter()
            .filter(|g| !g.bounded)
            .map(|g| g.quantity.as_str())
            .collect();
        format!(
            "soak: {} — {} published, {} acked, {} dead-lettered (expected {}), lost {}, \
             misplaced {}, grew without bound: {}",
            if self.clean { "CLEAN" } else { "FAILED" },
            self.totals.published,
            self.totals.acked,
            self.totals.dead_lettered,
            self.totals.expected_dead_letters,
            self.totals.lost,
            self.totals.misplaced,
            if grew.is_empty() {
                "nothing".to_owned()
            } else {
                grew.join(", ")
            },
        )
    }
}

/// The queue's policy: three deliveries with a short exponential backoff, then the
/// dead-letter queue — so retries wait in the broker's durable timers the whole run.
fn policy() -> DeliveryPolicy {
    DeliveryPolicy {
        max_deliveries: 3,
        backoff: Backoff {
            base: Duration::from_millis(100),
            cap: Duration::from_secs(1),
            multiplier: 2.0,
            jitter: 0.2,
        },
        dead_letter: true,
        ..DeliveryPolicy::default()
    }
}

/// Runs the soak and writes its reports into `plan.out`.
pub async fn run(plan: &SoakPlan) -> anyhow::Result<SoakReport> {
    plan.mix.validate().map_err(anyhow::Error::msg)?;
    let ferry = Ferry::connect(&plan.url)
        .await
        .with_context(|| format!("connect {}", plan.url))?;
    let queue = format!("soak-{}", ferry::message::new_id().to_lowercase());
    ferry
        .declare_queue(&QueueDecl::new(&queue).delivery(policy()))
        .await
        .with_context(|| format!("declare {queue}"))?;
    let tally = Arc::new(Tally::default());
    let latencies = Arc::new(Latencies::new());
    let mut tasks = JoinSet::new();
    for _ in 0..plan.workers {
        tasks.spawn(traffic::work(
            ferry.clone(),
            queue.clone(),
            plan.prefetch,
            tally.clone(),
            latencies.clone(),
        ));
    }
    tasks.spawn(traffic::read_dead_letters(
        ferry.clone(),
        queue.clone(),
        tally.clone(),
    ));
    let mut producer = tokio::spawn(traffic::produce(
        ferry.clone(),
        queue.clone(),
        plan.rate,
        plan.message_size,
        plan.mix,
        tally.clone(),
    ));

    let started = Instant::now();
    let samples = sample_until(plan, started, &tally, &latencies, &mut producer).await?;
    tally.stop_producing.store(true, Ordering::SeqCst);
    producer.await.context("producer panicked")??;
    let drained = traffic::drain(&tally, plan.drain_limit).await;
    tally.stop_consuming.store(true, Ordering::SeqCst);
    while let Some(joined) = tasks.join_next().await {
        joined.context("consumer panicked")??;
    }
    // A drain that stalls is the finding, not an error of the run: the report counts what
    // never reached its end as lost.
    if let Err(e) = drained {
        eprintln!("soak: {e:#}");
    }
    let source = Source::queue(&queue);
    ferry
        .delete(&source)
        .await
        .with_context(|| format!("delete {source}"))?;
    // Some engines remove the dead letters with their queue.
    match ferry.delete(&source.clone().dead_letters()).await {
        Ok(()) | Err(ferry::Error::NotFound { .. }) => {}
        Err(e) => return Err(e).context(format!("delete the dead letters of {source}")),
    }
    let _ = ferry.close().await;

    let report = conclude(plan, started.elapsed(), samples, &tally, &latencies);
    report::write(&report, &plan.out)?;
    Ok(report)
}

/// Samples every `plan.sample_every` until the planned duration is over; a producer that
/// fails ends the soak at once with its error.
async fn sample_until(
    plan: &SoakPlan,
    started: Instant,
    tally: &Tally,
    latencies: &Latencies,
    producer: &mut tokio::task::JoinHandle<anyhow::Result<()>>,
) -> anyhow::Result<Vec<Sample>> {
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + plan.sample_every,
        plan.sample_every,
    );
    while started.elapsed() < plan.duration {
        tokio::select! {
            _ = tick.tick() => {}
            ended = &mut *producer => {
                ended.context("producer panicked")??;
                anyhow::bail!("the producer stopped before the soak's end");
            }
        }
        let sample = Sample {
            at_secs: started.elapsed().as_secs_f64(),
            resources: resources::read(plan.pid, plan.data_dir.as_deref()),
            latency: Percentiles::of(&latencies.take_interval()),
            published: tally.published.load(Ordering::SeqCst),
            ended: tally.ended(),
            dead_lettered: tally.dead_lettered.load(Ordering::SeqCst),
            outstanding: tally.outstanding(),
        };
        eprintln!("{}", report::sample_line(&sample));
        samples.push(sample);
    }
    Ok(samples)
}

/// Tolerances of the growth verdict: a quarter over the early level, plus a floor for
/// quantities that start small (a few MiB of allocator slack, a few sockets, one segment).
const RSS_TOLERANCE: Tolerance = Tolerance {
    relative: 0.25,
    absolute: 32.0,
};
const FILES_TOLERANCE: Tolerance = Tolerance {
    relative: 0.25,
    absolute: 16.0,
};
const DISK_TOLERANCE: Tolerance = Tolerance {
    relative: 0.25,
    absolute: 128.0,
};
/// The backlog must not creep up either: the engine keeps pace with the rate.
const BACKLOG_TOLERANCE: Tolerance = Tolerance {
    relative: 0.5,
    absolute: 1_000.0,
};

fn conclude(
    plan: &SoakPlan,
    elapsed: Duration,
    samples: Vec<Sample>,
    tally: &Tally,
    latencies: &Latencies,
) -> SoakReport {
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::SeqCst);
    let totals = Totals {
        published: load(&tally.published),
        acked: load(&tally.acked),
        dead_lettered: load(&tally.dead_lettered),
        expected_dead_letters: load(&tally.published_dying),
        nacked: load(&tally.nacked),
        rejected: load(&tally.rejected),
        redelivered: load(&tally.redelivered),
        lost: tally.outstanding(),
        misplaced: load(&tally.misplaced),
    };
    let series = |f: &dyn Fn(&Sample) -> f64| samples.iter().map(f).collect::<Vec<f64>>();
    let growth = vec![
        growth::judge("rss_mib", &series(&|s| s.resources.rss_mib), RSS_TOLERANCE),
        growth::judge(
            "open_files",
            &series(&|s| s.resources.open_files as f64),
            FILES_TOLERANCE,
        ),
        growth::judge(
            "disk_mib",
            &series(&|s| s.resources.disk_mib),
            DISK_TOLERANCE,
        ),
        growth::judge(
            "outstanding",
            &series(&|s| s.outstanding as f64),
            BACKLOG_TOLERANCE,
        ),
    ];
    let clean = totals.lost == 0
        && totals.misplaced == 0
        && totals.dead_lettered == totals.expected_dead_letters
        && growth.iter().all(|g| g.bounded);
    SoakReport {
        url: plan.url.clone(),
        duration_secs: elapsed.as_secs_f64(),
        rate: plan.rate,
        message_size: plan.message_size,
        workers: plan.workers,
        samples,
        totals,
        latency: Percentiles::of(&latencies.whole.lock().unwrap()),
        growth,
        clean,
    }
}
