//! `ferry bench fanout`: a partitioned topic in process, under `Fsync` durability for the
//! topic and for every subscription's state, 1 KiB keyed payloads, 4 producers publishing
//! batches — first with no subscription, then fanned out to 1, 10 and 50 subscriptions each
//! consuming everything — every case in a broker of its own. Each figure is a difference of
//! counters read at the two edges of a window that starts after a warm-up.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use comfy_table::{CellAlignment, Table};
use ferry_broker::{
    Acked, Broker, Durability, LeaseToken, Name, OutgoingMessage, Seq, SubscriptionSpec, TopicSpec,
};
use hdrhistogram::Histogram;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::broker::{BrokerDirArgs, Fresh, WindowArgs, process, runtime};
use super::json::{Json, machine as machine_json, obj};
use super::machine::Machine;
use super::report::{count, num};
use super::target_check::TargetCheck;
use super::{fsync_count, latency_histogram};

const TOPIC: &str = "fanout";
const PARTITIONS: u32 = 16;
const PRODUCERS: usize = 4;
const PAYLOAD_BYTES: usize = 1024;
/// Consumer tasks per subscription. Two, so that one can wait in `receive` while the other's
/// `ack_batch` waits for its fdatasync: a subscription is never idle on its own round trip,
/// and each subscription is served like an independent application would serve it.
const CONSUMERS_PER_SUBSCRIPTION: usize = 2;
/// How long an idle consumer's receive waits before it looks at the stop flag again.
const RECEIVE_WAIT: Duration = Duration::from_millis(20);
/// Total delivered rate with 10 subscriptions over the rate with 1.
const FANOUT_RATIO_TARGET: f64 = 5.0;
/// Disk bytes per published message each added subscription may add, as a share of the
/// bytes per message with no subscription.
const BYTES_PER_ADDED_TARGET: f64 = 0.10;

#[derive(clap::Args, Debug)]
pub struct FanoutArgs {
    /// Short run (well under a minute): 1, 3 and 10 subscriptions, 0.5 s warm-up, 2 s windows.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub dir: BrokerDirArgs,
    /// Subscription counts to fan out to, comma-separated (default 1,10,50, or 1,3,10 with
    /// --quick). The no-subscription case always runs: the byte targets compare with it.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub subscriptions: Vec<usize>,
    #[command(flatten)]
    pub window: WindowArgs,
    /// Messages per publish_to_topic call.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub batch: usize,
    /// Most messages one receive call asks for.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub receive_max: usize,
    /// Producers run at most N messages ahead of the acks of every subscription, so each
    /// subscription's backlog stays bounded instead of growing for as long as a window lasts.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub credit: usize,
    /// Also write every figure as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Clone)]
struct Plan {
    quick: bool,
    warmup: Duration,
    window: Duration,
    batch: usize,
    receive_max: usize,
    credit: usize,
    /// Subscription counts, the no-subscription case (0) first.
    cases: Vec<usize>,
}

/// What one case measured over its window.
#[derive(Debug, Clone)]
pub struct Case {
    subscriptions: usize,
    elapsed: Duration,
    published: u64,
    /// Delivered and acked, summed over the subscriptions.
    acked: u64,
    /// Fewest and most acked by one subscription.
    acked_min: u64,
    acked_max: u64,
    fsyncs: u64,
    cpu_seconds: f64,
    /// /proc/self/io write_bytes: what the process sent to the storage layer, counted when a
    /// page is dirtied — so a 4 KiB page rewritten after each fdatasync counts every time, as
    /// the disk sees it.
    write_bytes: Option<u64>,
    /// /proc/self/io wchar: bytes passed to write calls (the bench writes nothing itself).
    syscall_bytes: Option<u64>,
    /// Sectors written to the broker directory's block device (/sys/class/block/*/stat), in
    /// bytes: what the disk got, file system journal included — and anything else writing
    /// to that device meanwhile.
    device_bytes: Option<u64>,
    /// Growth of the sum of file sizes under the broker directory.
    dir_growth: i64,
    /// Messages the subscriptions track (ready + in flight), summed, at the window's end.
    depth_end: usize,
    publish_ns: Histogram<u64>,
}

impl Case {
    fn per_sec(&self, n: u64) -> f64 {
        n as f64 / self.elapsed.as_secs_f64()
    }
    fn published_per_sec(&self) -> f64 {
        self.per_sec(self.published)
    }
    fn published_mb_per_sec(&self) -> f64 {
        self.published_per_sec() * PAYLOAD_BYTES as f64 / 1e6
    }
    fn acked_per_sec(&self) -> f64 {
        self.per_sec(self.acked)
    }
    /// Disk bytes per published message, as the targets are checked: what the block device
    /// got where /sys says, else write_bytes, else the directory's growth. write_bytes is not
    /// the first choice because the kernel counts it per dirtied folio: with large folios a
    /// small append into a folio cleaned by the last fdatasync counts the whole folio (here
    /// about 7 times what reaches the device).
    fn bytes_per_message(&self) -> f64 {
        let bytes = self
            .device_bytes
            .or(self.write_bytes)
            .map_or(self.dir_growth as f64, |b| b as f64);
        bytes / self.published.max(1) as f64
    }
    fn write_bytes_per_message(&self) -> Option<f64> {
        self.write_bytes
            .map(|b| b as f64 / self.published.max(1) as f64)
    }
    fn syscall_bytes_per_message(&self) -> Option<f64> {
        self.syscall_bytes
            .map(|b| b as f64 / self.published.max(1) as f64)
    }
    fn device_bytes_per_message(&self) -> Option<f64> {
        self.device_bytes
            .map(|b| b as f64 / self.published.max(1) as f64)
    }
    fn dir_bytes_per_message(&self) -> f64 {
        self.dir_growth as f64 / self.published.max(1) as f64
    }
}

struct Flow {
    published: AtomicU64,
    acked: Vec<AtomicU64>,
    stop: AtomicBool,
    measuring: AtomicBool,
    /// One per subscription; permits = messages producers may still publish ahead of that
    /// subscription's acks. A producer takes a batch's worth from every one.
    credit: Vec<Semaphore>,
}

/// What /proc/self/io says this process wrote.
#[derive(Debug, Clone, Copy)]
struct Io {
    /// Bytes passed to write calls (wchar).
    syscall: u64,
    /// Bytes sent to the storage layer, counted when a page is dirtied (write_bytes).
    storage: u64,
}

fn io() -> Option<Io> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = io.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].trim().parse().ok()
    };
    Some(Io {
        syscall: field("wchar:")?,
        storage: field("write_bytes:")?,
    })
}

/// Sum of the sizes of the files under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// A cheap random key source (xorshift64*): keys spread over the partitions the way
/// unrelated entity ids do, without the bench measuring a cryptographic generator.
struct Keys(u64);

impl Keys {
    fn next(&mut self) -> Bytes {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let v = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        Bytes::copy_from_slice(format!("{v:016x}").as_bytes())
    }
}

async fn run_case(
    base: &Path,
    device: &str,
    plan: &Plan,
    subscriptions: usize,
) -> anyhow::Result<Case> {
    let fresh = Fresh::empty(base, &format!("fanout-{subscriptions}")).await?;
    let broker = fresh.broker.clone();
    let topic_spec = TopicSpec {
        durability: Durability::Fsync,
        ..TopicSpec::with_partitions(PARTITIONS)
    };
    broker.create_topic(TOPIC, topic_spec).await?;
    let names: Vec<Arc<str>> = (0..subscriptions)
        .map(|i| Arc::from(format!("sub-{i}").as_str()))
        .collect();
    for name in &names {
        let mut spec = SubscriptionSpec::new(Name::new(TOPIC)?);
        spec.delivery.durability = Durability::Fsync;
        broker.create_subscription(name, spec).await?;
    }
    let flow = Arc::new(Flow {
        published: AtomicU64::new(0),
        acked: (0..subscriptions).map(|_| AtomicU64::new(0)).collect(),
        stop: AtomicBool::new(false),
        measuring: AtomicBool::new(false),
        credit: (0..subscriptions)
            .map(|_| Semaphore::new(plan.credit.min(Semaphore::MAX_PERMITS)))
            .collect(),
    });

    let mut producers = JoinSet::new();
    for i in 0..PRODUCERS {
        let seed = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(i as u64 + 1) | 1;
        producers.spawn(produce(broker.clone(), flow.clone(), plan.batch, seed));
    }
    let mut consumers = JoinSet::new();
    for (s, name) in names.iter().enumerate() {
        for c in 0..CONSUMERS_PER_SUBSCRIPTION {
            consumers.spawn(consume(
                broker.clone(),
                name.clone(),
                s,
                format!("consumer-{c}"),
                flow.clone(),
                plan.receive_max,
            ));
        }
    }

    tokio::time::sleep(plan.warmup).await;
    let acked_now = |flow: &Flow| -> Vec<u64> {
        flow.acked
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .collect()
    };
    let dir = fresh.path().to_path_buf();
    let (published0, acked0) = (flow.published.load(Ordering::Relaxed), acked_now(&flow));
    let (fsyncs0, cpu0, io0, dev0, dir0) = (
        fsync_count::count(),
        process::cpu_seconds(),
        io(),
        super::device::written_bytes(device),
        dir_bytes(&dir),
    );
    let start = Instant::now();
    flow.measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(plan.window).await;
    flow.measuring.store(false, Ordering::Relaxed);
    let elapsed = start.elapsed();
    let (published1, acked1) = (flow.published.load(Ordering::Relaxed), acked_now(&flow));
    let (fsyncs1, cpu1, io1, dev1, dir1) = (
        fsync_count::count(),
        process::cpu_seconds(),
        io(),
        super::device::written_bytes(device),
        dir_bytes(&dir),
    );
    let mut depth_end = 0;
    for name in &names {
        depth_end += broker.describe_queue(name)?.stats.state.tracked;
    }

    flow.stop.store(true, Ordering::Relaxed);
    for credit in &flow.credit {
        // Wakes producers waiting for credit that no consumer will give any more.
        credit.close();
    }
    let mut publish_ns = latency_histogram();
    while let Some(result) = producers.join_next().await {
        let h = result.context("producer panicked")??;
        publish_ns.add(&h).expect("histograms share bounds");
    }
    while let Some(result) = consumers.join_next().await {
        result.context("consumer panicked")??;
    }

    // The broker's own counters must agree with what the tasks counted: every published
    // message referenced once by every subscription, every counted ack settled once.
    let published = flow.published.load(Ordering::Relaxed);
    let stored: u64 = broker
        .describe_topic(TOPIC)?
        .partitions
        .iter()
        .map(|p| p.end_offset - p.start_offset)
        .sum();
    if stored != published {
        bail!("counted {published} published, but the topic holds {stored}");
    }
    for (s, name) in names.iter().enumerate() {
        let stats = broker.describe_queue(name)?.stats;
        let acked = flow.acked[s].load(Ordering::Relaxed);
        if stats.next_seq != published || stats.acked != acked {
            bail!(
                "{name}: counted {published} published and {acked} acked, but the subscription counted {} and {}",
                stats.next_seq,
                stats.acked
            );
        }
    }
    drop(broker);
    fresh.close().await?;

    let per_sub: Vec<u64> = acked1.iter().zip(&acked0).map(|(b, a)| b - a).collect();
    Ok(Case {
        subscriptions,
        elapsed,
        published: published1 - published0,
        acked: per_sub.iter().sum(),
        acked_min: per_sub.iter().copied().min().unwrap_or(0),
        acked_max: per_sub.iter().copied().max().unwrap_or(0),
        fsyncs: fsyncs1 - fsyncs0,
        cpu_seconds: cpu1 - cpu0,
        write_bytes: io0.zip(io1).map(|(a, b)| b.storage - a.storage),
        syscall_bytes: io0.zip(io1).map(|(a, b)| b.syscall - a.syscall),
        device_bytes: dev0.zip(dev1).map(|(a, b)| b - a),
        dir_growth: dir1 as i64 - dir0 as i64,
        depth_end,
        publish_ns,
    })
}

/// One producer: a batch of keyed messages at a time, each awaited, until the stop flag.
async fn produce(
    broker: Broker,
    flow: Arc<Flow>,
    batch: usize,
    seed: u64,
) -> anyhow::Result<Histogram<u64>> {
    let mut hist = latency_histogram();
    let mut keys = Keys(seed);
    // One payload shared by every message (cloning `Bytes` is a reference count), so the
    // bench measures the broker, not the allocator.
    let payload = Bytes::from(vec![0x5Au8; PAYLOAD_BYTES]);
    'outer: while !flow.stop.load(Ordering::Relaxed) {
        for credit in &flow.credit {
            match credit.acquire_many(batch as u32).await {
                // Given back by that subscription's consumers, one permit per ack.
                Ok(permits) => permits.forget(),
                Err(_closed) => break 'outer,
            }
        }
        let messages: Vec<OutgoingMessage> = (0..batch)
            .map(|_| OutgoingMessage::new(payload.clone()).with_key(keys.next()))
            .collect();
        let started = Instant::now();
        broker
            .publish_to_topic(TOPIC, messages)
            .await
            .context("publish_to_topic")?;
        if flow.measuring.load(Ordering::Relaxed) {
            hist.saturating_record(started.elapsed().as_nanos() as u64);
        }
        flow.published.fetch_add(batch as u64, Ordering::Relaxed);
    }
    Ok(hist)
}

/// One consumer of subscription `index`: receive up to `max`, ack them in one batch.
async fn consume(
    broker: Broker,
    name: Arc<str>,
    index: usize,
    consumer: String,
    flow: Arc<Flow>,
    max: usize,
) -> anyhow::Result<()> {
    while !flow.stop.load(Ordering::Relaxed) {
        let received = broker
            .receive(&name, &consumer, max, None, Some(RECEIVE_WAIT))
            .await
            .context("receive")?;
        if received.is_empty() {
            continue;
        }
        let acks: Vec<(Seq, LeaseToken)> = received.iter().map(|m| (m.seq, m.token)).collect();
        let outcomes = broker.ack_batch(&name, &acks).await.context("ack batch")?;
        for (message, outcome) in received.iter().zip(outcomes) {
            match outcome {
                Ok(Acked::Settled) => {}
                // Each message is delivered once and acked once, well inside its lease:
                // anything else is a redelivery, and the counts would mean something else.
                Ok(other) => bail!("{name}: ack of seq {} answered {other:?}", message.seq),
                Err(e) => return Err(e).with_context(|| format!("{name}: ack of {}", message.seq)),
            }
        }
        flow.acked[index].fetch_add(received.len() as u64, Ordering::Relaxed);
        flow.credit[index].add_permits(received.len());
    }
    Ok(())
}

fn find(cases: &[Case], n: usize) -> Option<&Case> {
    cases.iter().find(|c| c.subscriptions == n)
}

/// Bytes per published message that each subscription beyond the first adds, as a share of
/// the no-subscription bytes per message: (b(n) - b(1)) / (n - 1) / b(0).
fn added_share(cases: &[Case], n: usize, b: impl Fn(&Case) -> Option<f64>) -> Option<f64> {
    let (b0, b1, bn) = (
        b(find(cases, 0)?)?,
        b(find(cases, 1)?)?,
        b(find(cases, n)?)?,
    );
    (n > 1 && b0 > 0.0).then(|| (bn - b1) / (n - 1) as f64 / b0)
}

fn checks(cases: &[Case]) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    let one = find(cases, 1).map(Case::acked_per_sec);
    let ten = find(cases, 10).map(Case::acked_per_sec);
    let ratio = one.zip(ten).map(|(o, t)| t / o);
    out.push(TargetCheck {
        figure: "delivered + acked msgs/s, 10 subscriptions / 1".into(),
        measured: one
            .zip(ten)
            .map(|(o, t)| format!("{} / {} msgs/s", count(t), count(o))),
        target: format!(">= {FANOUT_RATIO_TARGET:.1} x"),
        ratio,
        pass: ratio.map(|r| r >= FANOUT_RATIO_TARGET),
        note: String::new(),
    });
    let b0 = find(cases, 0).map(Case::bytes_per_message);
    for c in cases.iter().filter(|c| c.subscriptions > 1) {
        let n = c.subscriptions;
        let share = added_share(cases, n, |c| Some(c.bytes_per_message()));
        let pct = |s: Option<f64>| s.map_or_else(|| "-".into(), |s| format!("{:.1} %", s * 100.0));
        let syscall = added_share(cases, n, Case::syscall_bytes_per_message);
        let folios = added_share(cases, n, Case::write_bytes_per_message);
        out.push(TargetCheck {
            figure: format!(
                "device bytes per message per added subscription, {} subscriptions",
                c.subscriptions
            ),
            measured: share.zip(b0).map(|(s, b0)| {
                format!("{:.0} B ({:.1} % of {:.0} B)", s * b0, s * 100.0, b0)
            }),
            target: format!("<= {:.0} % of no-subscription", BYTES_PER_ADDED_TARGET * 100.0),
            ratio: share,
            pass: share.map(|s| s <= BYTES_PER_ADDED_TARGET),
            note: format!(
                "(b(n) - b(1)) / (n - 1) / b(0), b = device B per published message (write_bytes where the device counters are unreadable); with b = written B: {}, with b = write_bytes: {}",
                pct(syscall),
                pct(folios)
            ),
        });
    }
    out
}

fn table(plan: &Plan, cases: &[Case]) -> String {
    let mut figures = Table::new();
    figures.load_preset(comfy_table::presets::ASCII_MARKDOWN);
    figures.set_header(vec![
        "subscriptions",
        "publish msgs/s",
        "publish MB/s",
        "delivered + acked msgs/s",
        "device B / msg",
        "written B / msg",
        "write_bytes B / msg",
        "dir growth B / msg",
        "fdatasyncs/s",
        "CPU cores",
        "notes",
    ]);
    for c in cases {
        figures.add_row(vec![
            c.subscriptions.to_string(),
            count(c.published_per_sec()),
            num(c.published_mb_per_sec()),
            if c.subscriptions == 0 {
                "-".into()
            } else {
                count(c.acked_per_sec())
            },
            c.device_bytes_per_message()
                .map_or_else(|| "-".into(), count),
            c.syscall_bytes_per_message()
                .map_or_else(|| "-".into(), count),
            c.write_bytes_per_message()
                .map_or_else(|| "-".into(), count),
            count(c.dir_bytes_per_message()),
            count(c.per_sec(c.fsyncs)),
            format!("{:.2}", c.cpu_seconds / c.elapsed.as_secs_f64()),
            format!(
                "publish_to_topic p50 {} ms, p99 {} ms{}",
                ms(&c.publish_ns, 0.5),
                ms(&c.publish_ns, 0.99),
                if c.subscriptions == 0 {
                    String::new()
                } else {
                    format!(
                        "; per subscription {} .. {} msgs/s; backlog at end {} (credit {})",
                        count(c.per_sec(c.acked_min)),
                        count(c.per_sec(c.acked_max)),
                        count(c.depth_end as f64),
                        plan.credit
                    )
                }
            ),
        ]);
    }
    for i in 1..10 {
        if let Some(col) = figures.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut targets = Table::new();
    targets.load_preset(comfy_table::presets::ASCII_MARKDOWN);
    targets.set_header(vec![
        "figure", "measured", "target", "ratio", "met?", "notes",
    ]);
    for c in checks(cases) {
        targets.add_row(c.cells());
    }
    format!("{figures}\n\n{targets}")
}

fn ms(h: &Histogram<u64>, q: f64) -> String {
    if h.is_empty() {
        "-".into()
    } else {
        num(h.value_at_quantile(q) as f64 / 1e6)
    }
}

fn legend(plan: &Plan) -> String {
    format!(
        "\
note: in process; topic and subscription state durability Fsync; a topic of {PARTITIONS} partitions;
  {PAYLOAD_BYTES} B payloads with random 16-byte keys; {PRODUCERS} producers each awaiting one
  publish_to_topic of {} at a time; {:.1} s warm-up, then a {:.1} s window per case, each case
  in a fresh broker{}.
  consumers: {CONSUMERS_PER_SUBSCRIPTION} per subscription, each receiving up to {} and acking
  them with one ack_batch.
  credit: producers run at most {} messages ahead of every subscription's acks.
  device B / msg: sectors written to the bench directory's block device over the window (file
  system journal included, and any other writer of that device) / messages published; the
  byte checks use it.
  written B / msg: /proc/self/io wchar (bytes passed to write calls) / messages published.
  write_bytes B / msg: /proc/self/io write_bytes / messages published; counted per dirtied
  folio, so a small append after an fdatasync counts a whole (possibly large) folio.
  dir growth: sum of file sizes under the broker directory (preallocated files count fully).
  ratio: the fan-out ratio itself; for the byte checks the share of the no-subscription bytes.",
        plan.batch,
        plan.warmup.as_secs_f64(),
        plan.window.as_secs_f64(),
        if plan.quick {
            " (--quick: short windows and 1, 3, 10 subscriptions, not the targets' 50)"
        } else {
            ""
        },
        plan.receive_max,
        plan.credit,
    )
}

fn case_json(c: &Case) -> Json {
    obj(vec![
        ("subscriptions", c.subscriptions.into()),
        ("seconds", c.elapsed.as_secs_f64().into()),
        ("published", c.published.into()),
        ("published_per_sec", c.published_per_sec().into()),
        ("published_mb_per_sec", c.published_mb_per_sec().into()),
        ("acked", c.acked.into()),
        ("acked_per_sec", c.acked_per_sec().into()),
        ("acked_min_subscription", c.acked_min.into()),
        ("acked_max_subscription", c.acked_max.into()),
        ("fsyncs", c.fsyncs.into()),
        ("cpu_seconds", c.cpu_seconds.into()),
        ("write_bytes", c.write_bytes.into()),
        ("wchar", c.syscall_bytes.into()),
        ("device_written_bytes", c.device_bytes.into()),
        ("dir_growth_bytes", (c.dir_growth as f64).into()),
        ("bytes_per_message", c.bytes_per_message().into()),
        ("depth_end", c.depth_end.into()),
        (
            "publish_p50_us",
            (c.publish_ns.value_at_quantile(0.5) as f64 / 1e3).into(),
        ),
        (
            "publish_p99_us",
            (c.publish_ns.value_at_quantile(0.99) as f64 / 1e3).into(),
        ),
    ])
}

fn json(machine: &Machine, plan: &Plan, cases: &[Case]) -> Json {
    obj(vec![
        ("machine", machine_json(machine)),
        (
            "settings",
            obj(vec![
                ("quick", plan.quick.into()),
                ("warmup_seconds", plan.warmup.as_secs_f64().into()),
                ("window_seconds", plan.window.as_secs_f64().into()),
                ("partitions", u64::from(PARTITIONS).into()),
                ("producers", PRODUCERS.into()),
                (
                    "consumers_per_subscription",
                    CONSUMERS_PER_SUBSCRIPTION.into(),
                ),
                ("batch", plan.batch.into()),
                ("receive_max", plan.receive_max.into()),
                ("credit", plan.credit.into()),
                ("payload_bytes", PAYLOAD_BYTES.into()),
            ]),
        ),
        ("cases", Json::Arr(cases.iter().map(case_json).collect())),
        (
            "checks",
            Json::Arr(
                checks(cases)
                    .into_iter()
                    .map(|c| obj(c.json_fields()))
                    .collect(),
            ),
        ),
    ])
}

pub fn run(args: &FanoutArgs) -> anyhow::Result<()> {
    fsync_count::install()?;
    if args.batch == 0 || args.receive_max == 0 {
        bail!("--batch and --receive-max must be at least 1");
    }
    if args.credit < args.batch {
        bail!(
            "--credit {} is less than one batch ({}): producers could never publish",
            args.credit,
            args.batch
        );
    }
    let quick = args.quick;
    let mut cases = if args.subscriptions.is_empty() {
        if quick {
            vec![1, 3, 10]
        } else {
            vec![1, 10, 50]
        }
    } else {
        args.subscriptions.clone()
    };
    cases.push(0);
    cases.sort();
    cases.dedup();
    let plan = Plan {
        quick,
        warmup: args.window.warmup(quick)?,
        window: args.window.window(quick)?,
        batch: args.batch,
        receive_max: args.receive_max,
        credit: args.credit,
        cases,
    };

    let (scratch, machine) = args.dir.scratch()?;
    let dir = scratch.path();
    let runtime = runtime()?;
    let mut results = Vec::with_capacity(plan.cases.len());
    for (i, &n) in plan.cases.iter().enumerate() {
        eprintln!(
            "[{}/{}] {n} subscriptions: {:.1} s warm-up, {:.1} s window",
            i + 1,
            plan.cases.len(),
            plan.warmup.as_secs_f64(),
            plan.window.as_secs_f64()
        );
        results.push(runtime.block_on(run_case(dir, &machine.fs_source, &plan, n))?);
    }
    drop(runtime);

    println!("{}", machine.line());
    println!("{}", table(&plan, &results));
    println!("{}", legend(&plan));
    super::json::write(args.json.as_deref(), || json(&machine, &plan, &results))?;
    scratch.close().context("remove the scratch directory")?;
    Ok(())
}
