//! One workload against one target, with the same client logic for every engine: declare
//! fresh destinations, run producers and consumers as the workload says, measure, count,
//! and delete what was declared.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use bytes::Bytes;
use ferry::capability::Feature;
use ferry::{
    Backoff, ConsumerOptions, DeliveryPolicy, Destination, Error, Ferry, Message, QueueDecl,
    Source, SubscriptionDecl, TopicDecl,
};
use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::task::JoinSet;

use crate::pacing::Pacer;
use crate::process::{Usage, Watch};
use crate::stats::{self, Percentiles};
use crate::workload::{AckMode, Kind, Mode, Workload};

/// The header carrying a message's send time, in microseconds since the Unix epoch, read at
/// delivery for the end-to-end latency.
pub const SENT_HEADER: &str = "bench-sent-us";

/// A consumer that sees nothing for this long while messages are still owed fails the run
/// rather than hanging it.
const IDLE_LIMIT: Duration = Duration::from_secs(30);

/// Messages per second and megabytes (10⁶ B of payload) per second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Throughput {
    pub msgs_per_sec: f64,
    pub mb_per_sec: f64,
}

impl Throughput {
    fn of(messages: u64, size: usize, elapsed: Duration) -> Throughput {
        let secs = elapsed.as_secs_f64().max(1e-9);
        Throughput {
            msgs_per_sec: messages as f64 / secs,
            mb_per_sec: (messages * size as u64) as f64 / 1e6 / secs,
        }
    }
}

/// Every message accounted for, over the whole run (warm-up and drain included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub published: u64,
    /// `published` × subscriptions: the acks owed.
    pub expected_acks: u64,
    pub acked: u64,
    /// First deliveries nacked on purpose (`nack_fraction`).
    pub nacked: u64,
    /// Deliveries with an attempt above 1.
    pub redelivered: u64,
}

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    /// The queue or topic declared for this run (deleted afterwards).
    pub destination: String,
    /// The subscriptions of the topic (`sub-0`, ...), empty for a queue.
    pub subscriptions: Vec<String>,
    /// The measured window (live) or the publish and drain phases (backlog), in seconds.
    pub publish_secs: f64,
    pub consume_secs: f64,
    pub publish: Throughput,
    /// Acks over all subscriptions.
    pub consume: Throughput,
    /// Per publish call, from the call to the engine's acknowledgement.
    pub publish_latency: Option<Percentiles>,
    /// Per first delivery, from the send time in [`SENT_HEADER`] to its arrival.
    pub end_to_end_latency: Option<Percentiles>,
    pub counts: Counts,
    /// Live runs: the most messages producers let the slowest reader fall behind.
    pub max_backlog: Option<u64>,
    /// The engine's server process tree over the run, when its pid is known.
    pub server: Option<Usage>,
    /// The end-to-end latency curve for charts: (nines, ms).
    #[serde(skip)]
    pub end_to_end_curve: Vec<(f64, f64)>,
}

/// A target's answer to a workload.
#[derive(Debug, Clone)]
pub enum Outcome {
    Ran(Box<Figures>),
    /// The target cannot run this workload; the reason names the missing feature.
    Skipped(String),
    Failed(String),
}

/// Runs `workload` (already scaled) on a connected target. `pid` is the engine's server
/// process to sample, if known.
pub async fn run(ferry: &Ferry, workload: &Workload, pid: Option<u32>) -> Outcome {
    if let Some(reason) = cannot_run(ferry, workload) {
        return Outcome::Skipped(reason);
    }
    let names = Names::fresh(workload);
    let outcome = match names.declare(ferry).await {
        Err(Error::Unsupported {
            transport,
            feature,
            why,
        }) => Outcome::Skipped(format!("{transport} does not support {feature}: {why}")),
        Err(e) => Outcome::Failed(format!("declare: {e}")),
        Ok(()) => match measure(ferry, workload, &names, pid).await {
            Ok(figures) => Outcome::Ran(Box::new(figures)),
            Err(e) => Outcome::Failed(format!("{e:#}")),
        },
    };
    names.delete(ferry).await;
    outcome
}

/// The capability a workload needs and the target lacks, as a reason to skip.
fn cannot_run(ferry: &Ferry, workload: &Workload) -> Option<String> {
    let caps = ferry.capabilities();
    let mut needed = Vec::new();
    if workload.kind == Kind::Fanout {
        needed.push(Feature::FanOut);
    }
    if workload.consumers > 1 {
        needed.push(Feature::CompetingConsumers);
    }
    if workload.nack_fraction > 0.0 {
        needed.push(Feature::Redelivery);
    }
    needed.into_iter().find_map(|f| match caps.require(f) {
        Err(e) => Some(e.to_string()),
        Ok(()) => None,
    })
}

/// Fresh names for one run, so runs never see each other's messages.
struct Names {
    /// The queue, or the topic of a fan-out.
    destination: String,
    kind: Kind,
    subscriptions: Vec<String>,
}

impl Names {
    fn fresh(workload: &Workload) -> Names {
        let destination = format!(
            "bench-{}-{}",
            workload.name,
            ferry::message::new_id().to_lowercase()
        );
        let subscriptions = match workload.kind {
            Kind::Queue => Vec::new(),
            Kind::Fanout => (0..workload.readers())
                .map(|i| format!("sub-{i}"))
                .collect(),
        };
        Names {
            destination,
            kind: workload.kind,
            subscriptions,
        }
    }

    fn target(&self) -> Destination {
        match self.kind {
            Kind::Queue => Destination::queue(&self.destination),
            Kind::Fanout => Destination::topic(&self.destination),
        }
    }

    fn sources(&self) -> Vec<Source> {
        match self.kind {
            Kind::Queue => vec![Source::queue(&self.destination)],
            Kind::Fanout => self
                .subscriptions
                .iter()
                .map(|s| Source::subscription(&self.destination, s))
                .collect(),
        }
    }

    async fn declare(&self, ferry: &Ferry) -> ferry::Result<()> {
        let policy = delivery_policy(ferry);
        match self.kind {
            Kind::Queue => {
                ferry
                    .declare_queue(&QueueDecl::new(&self.destination).delivery(policy))
                    .await
            }
            Kind::Fanout => {
                ferry
                    .declare_topic(&TopicDecl::new(&self.destination))
                    .await?;
                for name in &self.subscriptions {
                    ferry
                        .declare_subscription(
                            &SubscriptionDecl::new(&self.destination, name)
                                .delivery(policy.clone()),
                        )
                        .await?;
                }
                Ok(())
            }
        }
    }

    /// Best effort: a failed delete must not hide the run's figures, so it is only printed.
    async fn delete(&self, ferry: &Ferry) {
        for source in self.sources() {
            if let Err(e) = ferry.delete(&source).await
                && !matches!(e, Error::NotFound { .. })
            {
                eprintln!("warning: delete {source}: {e}");
            }
            // No dead-letter queue is declared; this removes one an engine made anyway.
            let _ = ferry.delete(&source.dead_letters()).await;
        }
        if self.kind == Kind::Fanout
            && let Err(e) = ferry.delete_topic(&self.destination).await
            && !matches!(e, Error::NotFound { .. })
        {
            eprintln!("warning: delete topic {}: {e}", self.destination);
        }
    }
}

/// No dead-letter queue and the shortest backoff: the bench nacks each message once, with
/// an explicit zero delay, so none should die and the backoff is never waited; a plain
/// policy asks the least of every engine. Engines with retry delays want a positive base
/// (a zero one would spin a failing message), those without want none; an engine without
/// redelivery gets one delivery (it runs no nacking workload anyway).
fn delivery_policy(ferry: &Ferry) -> DeliveryPolicy {
    let caps = ferry.capabilities();
    let base = if caps.supports(Feature::RetryDelay) {
        Duration::from_millis(1)
    } else {
        Duration::ZERO
    };
    DeliveryPolicy {
        max_deliveries: if caps.supports(Feature::Redelivery) {
            5
        } else {
            1
        },
        backoff: Backoff {
            base,
            cap: base,
            multiplier: 1.0,
            jitter: 0.0,
        },
        dead_letter: false,
        max_delay: Duration::ZERO,
        ..DeliveryPolicy::default()
    }
}

/// State shared by the producers and consumers of one run.
struct Shared {
    /// One per queue or subscription.
    readers: Vec<Reader>,
    /// In a live run, producers wait while the slowest reader is this many messages behind:
    /// an engine whose consumers cannot keep up is measured at the rate they sustain (as
    /// the OpenMessaging Benchmark's max-rate search does), instead of piling up a backlog
    /// whose drain would outlast the run many times over.
    max_backlog: u64,
    /// Latencies are recorded only while set: the live window, or all of a backlog run.
    measuring: AtomicBool,
    stop_producing: AtomicBool,
    producers_done: AtomicBool,
    published: AtomicU64,
    acked: AtomicU64,
    nacked: AtomicU64,
    redelivered: AtomicU64,
}

/// Per subscription: acks, to know when its consumers are done.
#[derive(Default)]
struct Reader {
    acked: AtomicU64,
}

impl Shared {
    fn new(readers: usize, max_backlog: u64) -> Shared {
        Shared {
            readers: (0..readers).map(|_| Reader::default()).collect(),
            max_backlog,
            measuring: AtomicBool::new(false),
            stop_producing: AtomicBool::new(false),
            producers_done: AtomicBool::new(false),
            published: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            nacked: AtomicU64::new(0),
            redelivered: AtomicU64::new(0),
        }
    }

    /// Messages published and not yet acked by the slowest reader.
    fn backlog(&self) -> u64 {
        let slowest = self
            .readers
            .iter()
            .map(|r| r.acked.load(Ordering::SeqCst))
            .min()
            .unwrap_or(0);
        self.published
            .load(Ordering::SeqCst)
            .saturating_sub(slowest)
    }
}

/// The live-run backlog bound: enough to keep every consumer's prefetch full and every
/// producer's next batches queued, so it only bites when consumers fall behind.
pub fn max_backlog(workload: &Workload) -> u64 {
    let producing = 4 * u64::from(workload.producers) * u64::from(workload.batch);
    let consuming = 4 * u64::from(workload.consumers) * u64::from(workload.prefetch);
    (producing + consuming).max(1_000)
}

async fn measure(
    ferry: &Ferry,
    workload: &Workload,
    names: &Names,
    pid: Option<u32>,
) -> anyhow::Result<Figures> {
    let shared = Arc::new(Shared::new(names.sources().len(), max_backlog(workload)));
    let watch = pid
        .map(|p| Watch::start(p).with_context(|| format!("watch server process {p}")))
        .transpose()?;
    let phases = match workload.mode {
        Mode::Live => live(ferry, workload, names, &shared).await?,
        Mode::Backlog => backlog(ferry, workload, names, &shared).await?,
    };
    Ok(figures(
        workload,
        names,
        &shared,
        phases,
        watch.map(|w| w.finish()),
    ))
}

/// What the phases of a run measured.
struct Phases {
    publish_secs: f64,
    consume_secs: f64,
    /// Publishes and acks counted within the measured phases.
    published: u64,
    acked: u64,
    publish_latency: Histogram<u64>,
    end_to_end_latency: Histogram<u64>,
}

/// Producers and consumers at once; only the window after the warm-up is measured, and
/// consumers then drain what is left so every message is accounted for.
async fn live(
    ferry: &Ferry,
    workload: &Workload,
    names: &Names,
    shared: &Arc<Shared>,
) -> anyhow::Result<Phases> {
    let consumers = start_consumers(ferry, workload, names, shared).await?;
    let producers = start_producers(ferry, workload, names, shared, None);
    tokio::time::sleep(workload.warmup()).await;
    let (published_before, acked_before) = snapshot(shared);
    shared.measuring.store(true, Ordering::SeqCst);
    let window = Instant::now();
    tokio::time::sleep(workload.duration()).await;
    shared.measuring.store(false, Ordering::SeqCst);
    let (published_after, acked_after) = snapshot(shared);
    let secs = window.elapsed().as_secs_f64();
    shared.stop_producing.store(true, Ordering::SeqCst);
    let publish_latency = join_all(producers).await?;
    shared.producers_done.store(true, Ordering::SeqCst);
    let end_to_end_latency = join_all(consumers).await?;
    Ok(Phases {
        publish_secs: secs,
        consume_secs: secs,
        published: published_after - published_before,
        acked: acked_after - acked_before,
        publish_latency,
        end_to_end_latency,
    })
}

/// Everything published first (timed), then consumers start and the drain is timed.
async fn backlog(
    ferry: &Ferry,
    workload: &Workload,
    names: &Names,
    shared: &Arc<Shared>,
) -> anyhow::Result<Phases> {
    let total = workload.messages.unwrap_or(0);
    shared.measuring.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let producers = start_producers(ferry, workload, names, shared, Some(total));
    let publish_latency = join_all(producers).await?;
    let publish_secs = started.elapsed().as_secs_f64();
    shared.producers_done.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let consumers = start_consumers(ferry, workload, names, shared).await?;
    let end_to_end_latency = join_all(consumers).await?;
    let consume_secs = started.elapsed().as_secs_f64();
    let (published, acked) = snapshot(shared);
    Ok(Phases {
        publish_secs,
        consume_secs,
        published,
        acked,
        publish_latency,
        end_to_end_latency,
    })
}

fn snapshot(shared: &Shared) -> (u64, u64) {
    (
        shared.published.load(Ordering::SeqCst),
        shared.acked.load(Ordering::SeqCst),
    )
}

fn figures(
    workload: &Workload,
    names: &Names,
    shared: &Shared,
    phases: Phases,
    server: Option<Usage>,
) -> Figures {
    let total_published = shared.published.load(Ordering::SeqCst);
    Figures {
        destination: names.destination.clone(),
        subscriptions: names.subscriptions.clone(),
        publish_secs: phases.publish_secs,
        consume_secs: phases.consume_secs,
        publish: Throughput::of(
            phases.published,
            workload.message_size,
            Duration::from_secs_f64(phases.publish_secs),
        ),
        consume: Throughput::of(
            phases.acked,
            workload.message_size,
            Duration::from_secs_f64(phases.consume_secs),
        ),
        publish_latency: Percentiles::of(&phases.publish_latency),
        end_to_end_latency: Percentiles::of(&phases.end_to_end_latency),
        counts: Counts {
            published: total_published,
            expected_acks: total_published * u64::from(workload.readers()),
            acked: shared.acked.load(Ordering::SeqCst),
            nacked: shared.nacked.load(Ordering::SeqCst),
            redelivered: shared.redelivered.load(Ordering::SeqCst),
        },
        max_backlog: (workload.mode == Mode::Live).then_some(shared.max_backlog),
        server,
        end_to_end_curve: stats::curve(&phases.end_to_end_latency),
    }
}

/// Waits for every task and merges their histograms; the first failure fails the run.
async fn join_all(
    mut tasks: JoinSet<anyhow::Result<Histogram<u64>>>,
) -> anyhow::Result<Histogram<u64>> {
    let mut merged = stats::histogram();
    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        match joined.context("task panicked").and_then(|r| r) {
            Ok(h) => merged.add(&h).expect("same histogram bounds"),
            Err(e) => {
                // Stop the others rather than leave them waiting for what will never come.
                tasks.abort_all();
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(merged),
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Producers publishing until told to stop (`total` None) or until `total` messages are
/// published between them. Each returns its publish-call latencies.
fn start_producers(
    ferry: &Ferry,
    workload: &Workload,
    names: &Names,
    shared: &Arc<Shared>,
    total: Option<u64>,
) -> JoinSet<anyhow::Result<Histogram<u64>>> {
    let pacer = Pacer::new(workload.producer_rate, workload.producers, workload.batch);
    let payload = Bytes::from(vec![b'x'; workload.message_size]);
    let claimed = Arc::new(AtomicU64::new(0));
    let mut tasks = JoinSet::new();
    for producer in 0..workload.producers {
        let publisher = ferry.publisher(names.target());
        let (shared, claimed, payload) = (shared.clone(), claimed.clone(), payload.clone());
        let (batch, keys) = (u64::from(workload.batch), u64::from(workload.keys));
        tasks.spawn(async move {
            let mut latencies = stats::histogram();
            let started = tokio::time::Instant::now();
            // Keys cycle from a different start per producer, so few producers still
            // spread over every key.
            let mut next_key = u64::from(producer);
            for call in 0.. {
                if pacer.is_paced() {
                    tokio::time::sleep_until(started + pacer.due(call)).await;
                }
                if total.is_none() {
                    while shared.backlog() > shared.max_backlog
                        && !shared.stop_producing.load(Ordering::SeqCst)
                    {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
                let n = match total {
                    None if shared.stop_producing.load(Ordering::SeqCst) => break,
                    None => batch,
                    Some(total) => {
                        let from = claimed.fetch_add(batch, Ordering::SeqCst);
                        if from >= total {
                            break;
                        }
                        batch.min(total - from)
                    }
                };
                let sent = now_us().to_string();
                let messages = (0..n)
                    .map(|_| {
                        let message =
                            Message::new(payload.clone()).with_header(SENT_HEADER, sent.clone());
                        if keys == 0 {
                            return message;
                        }
                        next_key += 1;
                        message.with_key(format!("key-{}", next_key % keys))
                    })
                    .collect();
                let called = Instant::now();
                publisher.send_batch(messages).await?;
                if shared.measuring.load(Ordering::Relaxed) {
                    latencies.saturating_record(called.elapsed().as_micros() as u64);
                }
                shared.published.fetch_add(n, Ordering::SeqCst);
            }
            Ok(latencies)
        });
    }
    tasks
}

/// `workload.consumers` consumers per source, each acking (and nacking its share) until
/// the producers are done and its source has acked everything published.
async fn start_consumers(
    ferry: &Ferry,
    workload: &Workload,
    names: &Names,
    shared: &Arc<Shared>,
) -> anyhow::Result<JoinSet<anyhow::Result<Histogram<u64>>>> {
    let mut tasks = JoinSet::new();
    for (reader, source) in names.sources().into_iter().enumerate() {
        for _ in 0..workload.consumers {
            let options = ConsumerOptions {
                prefetch: workload.prefetch as usize,
                poll: Duration::from_millis(100),
                ..ConsumerOptions::default()
            };
            let consumer = ferry
                .consumer(source.clone(), options)
                .await
                .with_context(|| format!("open a consumer on {source}"))?;
            tasks.spawn(consume(
                consumer,
                workload.ack,
                workload.prefetch as usize,
                workload.nack_fraction,
                shared.clone(),
                reader,
            ));
        }
    }
    Ok(tasks)
}

/// Decides which first deliveries are nacked: exactly `fraction` of them over a run, spread
/// evenly (delivery `n` is nacked when `floor((n+1)·f)` passes `floor(n·f)`), so the counts
/// can be checked without a random sample's slack.
#[derive(Debug, Clone, Copy)]
pub struct NackPlan {
    fraction: f64,
    seen: u64,
}

impl NackPlan {
    pub fn new(fraction: f64) -> NackPlan {
        NackPlan { fraction, seen: 0 }
    }

    /// Whether the next first delivery is to be nacked.
    pub fn nack_next(&mut self) -> bool {
        let n = self.seen as f64;
        self.seen += 1;
        ((n + 1.0) * self.fraction).floor() > (n * self.fraction).floor()
    }
}

async fn consume(
    mut consumer: ferry::Consumer,
    ack_mode: AckMode,
    max_in_flight: usize,
    nack_fraction: f64,
    shared: Arc<Shared>,
    reader: usize,
) -> anyhow::Result<Histogram<u64>> {
    let mut latencies = stats::histogram();
    let mut plan = NackPlan::new(nack_fraction);
    let mut in_flight: JoinSet<ferry::Result<()>> = JoinSet::new();
    let mut idle_since = Instant::now();
    // Acks still in flight count as owed: the loop goes on (settling them while it waits
    // for deliveries) until the source's acks reach what was published.
    let owed = |shared: &Shared| {
        !shared.producers_done.load(Ordering::SeqCst)
            || shared.readers[reader].acked.load(Ordering::SeqCst)
                < shared.published.load(Ordering::SeqCst)
    };
    while owed(&shared) {
        let Some(delivery) = consumer.next_within(Duration::from_millis(100)).await? else {
            if idle_since.elapsed() > IDLE_LIMIT && shared.producers_done.load(Ordering::SeqCst) {
                bail!(
                    "no delivery for {IDLE_LIMIT:?} with {} of {} acked",
                    shared.readers[reader].acked.load(Ordering::SeqCst),
                    shared.published.load(Ordering::SeqCst)
                );
            }
            // Settle finished acks so errors surface while waiting.
            while let Some(done) = in_flight.try_join_next() {
                done??;
            }
            continue;
        };
        idle_since = Instant::now();
        let first = delivery.attempt <= 1;
        if first {
            if shared.measuring.load(Ordering::Relaxed)
                && let Some(sent) = delivery
                    .header(SENT_HEADER)
                    .and_then(|s| s.parse::<u64>().ok())
            {
                latencies.saturating_record(now_us().saturating_sub(sent));
            }
        } else {
            shared.redelivered.fetch_add(1, Ordering::SeqCst);
        }
        let nack = first && plan.nack_next();
        let shared = shared.clone();
        let settle = async move {
            if nack {
                delivery.nack(Some(Duration::ZERO)).await?;
                shared.nacked.fetch_add(1, Ordering::SeqCst);
            } else {
                delivery.ack().await?;
                shared.readers[reader].acked.fetch_add(1, Ordering::SeqCst);
                shared.acked.fetch_add(1, Ordering::SeqCst);
            }
            Ok(())
        };
        match ack_mode {
            AckMode::Each => settle.await?,
            AckMode::Pipelined => {
                if in_flight.len() >= max_in_flight
                    && let Some(done) = in_flight.join_next().await
                {
                    done??;
                }
                in_flight.spawn(settle);
            }
        }
    }
    while let Some(done) = in_flight.join_next().await {
        done??;
    }
    consumer.close().await?;
    Ok(latencies)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nack_plan_nacks_exactly_its_fraction_spread_evenly() {
        let mut plan = NackPlan::new(0.1);
        let picks: Vec<bool> = (0..1000).map(|_| plan.nack_next()).collect();
        assert_eq!(picks.iter().filter(|p| **p).count(), 100);
        assert!(picks[..10].iter().filter(|p| **p).count() == 1);
        let mut none = NackPlan::new(0.0);
        assert!((0..1000).all(|_| !none.nack_next()));
    }
}
