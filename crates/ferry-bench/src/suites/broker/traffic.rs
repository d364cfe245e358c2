//! The traffic every scenario is made of: producer tasks publishing batches, and consumer
//! tasks receiving and acking, on one queue of one broker. A scenario starts the tasks, lets
//! them warm up, and reads shared counters at the two edges of its measurement window; every
//! figure is a difference of counters taken at those edges, so the ramp-up and the drain at
//! the end never count.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use ferry_broker::{Acked, Broker, LeaseToken, OutgoingMessage, ReceivedMessage, Seq};
use hdrhistogram::Histogram;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::super::{fsync_count, latency_histogram};
use super::process;

/// How long an idle consumer's receive waits for a message before it looks at the stop flag
/// again.
const RECEIVE_WAIT: Duration = Duration::from_millis(20);

/// How a consumer acks the messages of one receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AckMode {
    /// The acks of a receive in one `ack_batch`: one journal write for them all.
    Batch,
    /// All acks of a receive in flight at once, then the next receive: the journal's group
    /// commit can share one fdatasync among them, as it does for concurrent publishes.
    Concurrent,
    /// One ack at a time, each awaited before the next: one fdatasync round trip per message.
    Sequential,
}

impl AckMode {
    pub fn name(self) -> &'static str {
        match self {
            AckMode::Batch => "batch",
            AckMode::Concurrent => "concurrent",
            AckMode::Sequential => "sequential",
        }
    }
}

/// The shape of the traffic, the same in every scenario of a run.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub producers: usize,
    pub consumers: usize,
    /// Messages per `publish_batch`.
    pub batch: usize,
    /// `max` of each `receive`.
    pub receive_max: usize,
    pub acks: AckMode,
    pub payload_bytes: usize,
}

/// What runs in one window.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Consumers receive and ack; without them only producers run.
    pub consume: bool,
    /// Each published message carries this delay.
    pub publish_delay: Option<Duration>,
    /// Producers may run at most this many messages ahead of the acks (only with consumers):
    /// what keeps the queue's depth, and so the latency, from growing for as long as the
    /// window lasts when producers are faster than consumers.
    pub credit: Option<usize>,
}

/// Counters and flags shared by the tasks of one window.
struct Flow {
    published: AtomicU64,
    acked: AtomicU64,
    /// Latencies are recorded only while set: the window's, not the warm-up's or the drain's.
    measuring: AtomicBool,
    stop: AtomicBool,
    /// Permits = messages producers may still publish ahead of the acks.
    credit: Option<Semaphore>,
    /// Time zero of the payload stamps.
    base: Instant,
}

impl Flow {
    /// Nanoseconds since `base`.
    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    fn stamp(&self) -> u64 {
        // Never 0: a zero stamp marks messages published outside any window (a fill).
        self.now().max(1)
    }
}

/// What one window measured.
#[derive(Debug, Clone)]
pub struct Window {
    pub elapsed: Duration,
    /// Messages whose publish completed in the window.
    pub published: u64,
    /// Messages whose ack completed in the window.
    pub acked: u64,
    /// The storage engine's fdatasyncs (message and journal logs together).
    pub fsyncs: u64,
    pub cpu_seconds: f64,
    /// Publish stamp → ack done, for messages published and acked in the window.
    pub end_to_end_ns: Histogram<u64>,
    /// One `publish_batch` call, for the batches completed in the window.
    pub publish_ns: Histogram<u64>,
    /// Messages tracked by the queue (ready, in flight, delayed) at the window's edges.
    pub depth_start: usize,
    pub depth_end: usize,
}

impl Window {
    fn per_sec(&self, n: u64) -> f64 {
        n as f64 / self.elapsed.as_secs_f64()
    }
    pub fn published_per_sec(&self) -> f64 {
        self.per_sec(self.published)
    }
    pub fn acked_per_sec(&self) -> f64 {
        self.per_sec(self.acked)
    }
    pub fn fsyncs_per_sec(&self) -> f64 {
        self.per_sec(self.fsyncs)
    }
    /// Cores kept busy on average: a figure near the machine's core count says CPU bound.
    pub fn cores_busy(&self) -> f64 {
        self.cpu_seconds / self.elapsed.as_secs_f64()
    }
}

/// Microseconds at a quantile; NaN for an empty histogram.
pub fn quantile_us(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        f64::NAN
    } else {
        h.value_at_quantile(q) as f64 / 1e3
    }
}

pub fn max_us(h: &Histogram<u64>) -> f64 {
    if h.is_empty() {
        f64::NAN
    } else {
        h.max() as f64 / 1e3
    }
}

/// A payload of `len` bytes starting with the little-endian stamp. One buffer per batch:
/// every message of a batch shares it (cloning `Bytes` is a reference count), so the bench
/// measures the broker, not the allocator.
fn payload(stamp: u64, len: usize) -> Bytes {
    let mut v = vec![0x5Au8; len.max(8)];
    v[..8].copy_from_slice(&stamp.to_le_bytes());
    Bytes::from(v)
}

fn stamp_of(message: &ReceivedMessage) -> u64 {
    message
        .payload
        .get(..8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// One `publish_batch` worth of messages, all stamped `stamp` (0: not stamped).
pub(super) fn batch(stamp: u64, shape: &Shape, delay: Option<Duration>) -> Vec<OutgoingMessage> {
    let payload = payload(stamp, shape.payload_bytes);
    (0..shape.batch)
        .map(|_| {
            let m = OutgoingMessage::new(payload.clone());
            match delay {
                Some(d) => m.with_delay(d),
                None => m,
            }
        })
        .collect()
}

/// Messages the queue tracks now.
pub fn depth(broker: &Broker, queue: &str) -> anyhow::Result<usize> {
    Ok(broker.describe_queue(queue)?.stats.state.tracked)
}

/// Runs `load` on `queue` for `warmup`, then measures for `window`, then stops every task
/// and waits for it. The broker must not be used by anything else meanwhile: the depth and
/// the final consistency check read its counters.
pub async fn run(
    broker: &Broker,
    queue: &str,
    shape: &Shape,
    load: Load,
    warmup: Duration,
    window: Duration,
) -> anyhow::Result<Window> {
    let before = broker.describe_queue(queue)?.stats;
    let flow = Arc::new(Flow {
        published: AtomicU64::new(0),
        acked: AtomicU64::new(0),
        measuring: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        credit: load
            .credit
            .filter(|_| load.consume)
            .map(|n| Semaphore::new(n.min(Semaphore::MAX_PERMITS))),
        base: Instant::now(),
    });
    let queue_name: Arc<str> = Arc::from(queue);
    let mut producers = JoinSet::new();
    for _ in 0..shape.producers {
        producers.spawn(produce(
            broker.clone(),
            queue_name.clone(),
            flow.clone(),
            *shape,
            load.publish_delay,
        ));
    }
    let mut consumers = JoinSet::new();
    if load.consume {
        for i in 0..shape.consumers {
            consumers.spawn(consume(
                broker.clone(),
                queue_name.clone(),
                format!("consumer-{i}"),
                flow.clone(),
                *shape,
            ));
        }
    }

    tokio::time::sleep(warmup).await;
    let depth_start = depth(broker, queue)?;
    let (published0, acked0) = (
        flow.published.load(Ordering::Relaxed),
        flow.acked.load(Ordering::Relaxed),
    );
    let (fsyncs0, cpu0) = (fsync_count::count(), process::cpu_seconds());
    let start = Instant::now();
    flow.measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(window).await;
    flow.measuring.store(false, Ordering::Relaxed);
    let elapsed = start.elapsed();
    let (published1, acked1) = (
        flow.published.load(Ordering::Relaxed),
        flow.acked.load(Ordering::Relaxed),
    );
    let (fsyncs1, cpu1) = (fsync_count::count(), process::cpu_seconds());
    let depth_end = depth(broker, queue)?;

    flow.stop.store(true, Ordering::Relaxed);
    if let Some(credit) = &flow.credit {
        // Wakes producers waiting for credit that no consumer will give any more.
        credit.close();
    }
    let mut publish_ns = latency_histogram();
    while let Some(result) = producers.join_next().await {
        let h = result.context("producer panicked")??;
        publish_ns.add(&h).expect("histograms share bounds");
    }
    let mut end_to_end_ns = latency_histogram();
    while let Some(result) = consumers.join_next().await {
        let h = result.context("consumer panicked")??;
        end_to_end_ns.add(&h).expect("histograms share bounds");
    }

    // The broker's own counters must agree with what the tasks counted: a mismatch means a
    // lost or double-counted completion, and every figure above would be wrong.
    let after = broker.describe_queue(queue)?.stats;
    let published = flow.published.load(Ordering::Relaxed);
    let acked = flow.acked.load(Ordering::Relaxed);
    if after.next_seq - before.next_seq != published || after.acked - before.acked != acked {
        bail!(
            "counted {published} published and {acked} acked, but the broker counted {} and {}",
            after.next_seq - before.next_seq,
            after.acked - before.acked
        );
    }
    let expected_depth = before.state.tracked as u64 + published - acked;
    if after.state.tracked as u64 != expected_depth {
        bail!(
            "the queue tracks {} messages, expected {expected_depth} ({} before, {published} published, {acked} acked)",
            after.state.tracked,
            before.state.tracked
        );
    }

    Ok(Window {
        elapsed,
        published: published1 - published0,
        acked: acked1 - acked0,
        fsyncs: fsyncs1 - fsyncs0,
        cpu_seconds: cpu1 - cpu0,
        end_to_end_ns,
        publish_ns,
        depth_start,
        depth_end,
    })
}

/// One producer: a batch at a time, each awaited, until the stop flag. Returns the latencies
/// of the `publish_batch` calls completed in the window.
async fn produce(
    broker: Broker,
    queue: Arc<str>,
    flow: Arc<Flow>,
    shape: Shape,
    delay: Option<Duration>,
) -> anyhow::Result<Histogram<u64>> {
    let mut hist = latency_histogram();
    let n = shape.batch as u64;
    while !flow.stop.load(Ordering::Relaxed) {
        if let Some(credit) = &flow.credit {
            match credit.acquire_many(shape.batch as u32).await {
                // Given back by consumers, one permit per ack.
                Ok(permits) => permits.forget(),
                Err(_closed) => break,
            }
        }
        let stamp = flow.stamp();
        let messages = batch(stamp, &shape, delay);
        let started = Instant::now();
        broker
            .publish_batch(&queue, messages)
            .await
            .context("publish_batch")?;
        if flow.measuring.load(Ordering::Relaxed) {
            hist.saturating_record(started.elapsed().as_nanos() as u64);
        }
        flow.published.fetch_add(n, Ordering::Relaxed);
    }
    Ok(hist)
}

/// One consumer: receive up to `receive_max`, ack each, until the stop flag. Returns the
/// end-to-end latencies of the messages it acked in the window.
async fn consume(
    broker: Broker,
    queue: Arc<str>,
    name: String,
    flow: Arc<Flow>,
    shape: Shape,
) -> anyhow::Result<Histogram<u64>> {
    let mut hist = latency_histogram();
    while !flow.stop.load(Ordering::Relaxed) {
        let received = broker
            .receive(&queue, &name, shape.receive_max, None, Some(RECEIVE_WAIT))
            .await
            .context("receive")?;
        match shape.acks {
            AckMode::Batch => {
                if received.is_empty() {
                    continue;
                }
                let acks: Vec<(Seq, LeaseToken)> =
                    received.iter().map(|m| (m.seq, m.token)).collect();
                let outcomes = broker.ack_batch(&queue, &acks).await.context("ack batch")?;
                let done = flow.now();
                for (message, outcome) in received.iter().zip(outcomes) {
                    settled(message, outcome)?;
                    acked(&flow, &mut hist, stamp_of(message), done);
                }
            }
            AckMode::Sequential => {
                for message in received {
                    ack(&broker, &queue, &message).await?;
                    acked(&flow, &mut hist, stamp_of(&message), flow.now());
                }
            }
            AckMode::Concurrent => {
                let mut acks = JoinSet::new();
                for message in received {
                    let (broker, queue, flow) = (broker.clone(), queue.clone(), flow.clone());
                    acks.spawn(async move {
                        ack(&broker, &queue, &message).await?;
                        // Taken here, not when the consumer gets to join the task.
                        anyhow::Ok((stamp_of(&message), flow.now()))
                    });
                }
                while let Some(result) = acks.join_next().await {
                    let (stamp, done) = result.context("ack task panicked")??;
                    acked(&flow, &mut hist, stamp, done);
                }
            }
        }
    }
    Ok(hist)
}

async fn ack(broker: &Broker, queue: &str, message: &ReceivedMessage) -> anyhow::Result<()> {
    settled(message, broker.ack(queue, message.seq, message.token).await)
}

fn settled(message: &ReceivedMessage, outcome: ferry_broker::Result<Acked>) -> anyhow::Result<()> {
    match outcome {
        Ok(Acked::Settled) => Ok(()),
        // Each message is delivered once and acked once, well inside its lease: anything
        // else means a redelivery, and the counts would no longer mean what they say.
        Ok(other) => bail!("ack of seq {} answered {other:?}", message.seq),
        Err(e) => Err(e).with_context(|| format!("ack of seq {}", message.seq)),
    }
}

/// Counts one completed ack: gives its credit back to the producers and records its latency.
/// `done` is when the ack returned, on the stamps' clock.
fn acked(flow: &Flow, hist: &mut Histogram<u64>, stamp: u64, done: u64) {
    flow.acked.fetch_add(1, Ordering::Relaxed);
    if let Some(credit) = &flow.credit {
        credit.add_permits(1);
    }
    if stamp != 0 && flow.measuring.load(Ordering::Relaxed) {
        hist.saturating_record(done.saturating_sub(stamp));
    }
}
