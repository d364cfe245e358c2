//! `ferry bench remote`: the server over loopback, measured against the embedded broker in
//! the same run. For each payload size, the same producers (`--producers` tasks, each
//! publishing batches of `--batch` with `Fsync` durability) publish for a window first
//! in process (`Broker::publish_batch`), then through `ferry-client` to a `ferry-server`
//! on 127.0.0.1 (a fresh broker each): once with a `PublishStream` per producer (the
//! client's path for steady publishing, a message each way per batch) and once with a
//! unary `Client::publish` call per batch. The ratio stream / in-process is checked
//! against the target (≥ 0.5); the unary one is shown beside it. Each batch's latency is
//! recorded, and a single message's with one producer and batches of one. Then a streaming consumer
//! drains what the remote run published, acking each message, for the consume-ack rate.
//!
//! The server runs in this process, on its own runtime threads and a real TCP socket:
//! the client's encoding, HTTP/2 framing and the loopback stack are all paid, and the
//! machine's cores are shared by client and server as they would be on one host.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use comfy_table::{CellAlignment, Table};
use ferry_broker::{Durability, MessageId, OutgoingMessage, QueueSpec};
use ferry_client::{Client, ConsumerConfig, Message};
use hdrhistogram::Histogram;

use super::broker::Fresh;
use super::machine::Machine;
use super::{latency_histogram, scratch_dir};

pub(super) const QUEUE: &str = "bench";
/// Remote publish throughput over in-process, at least.
const TARGET_RATIO: f64 = 0.5;

#[derive(clap::Args, Debug)]
pub struct RemoteArgs {
    /// Short run: 1 s windows.
    #[arg(long)]
    pub quick: bool,
    /// Where to put the brokers (a scratch directory inside it is removed afterwards).
    /// Default: ./target if it exists, else the current directory.
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,
    /// Seconds of each measurement window (default 5, or 1 with --quick).
    #[arg(long, value_name = "N")]
    pub seconds: Option<f64>,
    /// Concurrent producers.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub producers: usize,
    /// Messages per publish call.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub batch: usize,
    /// The in-process producers choose each message's id, as the remote client does so
    /// that a retry is stored once: every message is then a key in the queue's dedup
    /// window on both sides. Compared with a run without it, this shows what the window
    /// costs the remote publish.
    #[arg(long)]
    pub chosen_ids: bool,
}

/// What one publish window measured.
pub(super) struct Window {
    /// Messages in the publish calls that completed inside the window.
    pub(super) messages: u64,
    pub(super) seconds: f64,
    /// Latency of each publish call, in nanoseconds.
    pub(super) calls: Histogram<u64>,
}

impl Window {
    pub(super) fn rate(&self) -> f64 {
        self.messages as f64 / self.seconds
    }
}

pub(super) fn payload(size: usize) -> Bytes {
    Bytes::from(vec![b'x'; size])
}

/// An id as a producer would choose it: a ULID of the wall clock and a random part.
fn chosen_id() -> MessageId {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let random = (u128::from(fastrand::u64(..)) << 64 | u128::from(fastrand::u64(..))) >> 48;
    MessageId::from_ulid(ulid::Ulid::from_parts(ms, random))
}

fn queue_spec() -> QueueSpec {
    QueueSpec {
        durability: Durability::Fsync,
        ..QueueSpec::default()
    }
}

/// Runs `producers` tasks calling `publish` (with the task's index, from 0) for `seconds`,
/// after a short warm-up.
async fn window<F, Fut>(
    producers: usize,
    batch: usize,
    seconds: f64,
    publish: F,
) -> anyhow::Result<Window>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let (window, (), ()) = probed_window(producers, batch, seconds, publish, || ()).await?;
    Ok(window)
}

/// [`window`], reading `probe` (counters kept outside the publishers: device sectors,
/// fdatasyncs, CPU time) at the two edges of the measured window, so that what it counts
/// belongs to the same seconds as the messages. Returns the window and both readings.
pub(super) async fn probed_window<F, Fut, P, T>(
    producers: usize,
    batch: usize,
    seconds: f64,
    publish: F,
    probe: P,
) -> anyhow::Result<(Window, T, T)>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
    P: Fn() -> T,
{
    let publish = Arc::new(publish);
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for producer in 0..producers {
        let (publish, measuring, stop, count) = (
            Arc::clone(&publish),
            Arc::clone(&measuring),
            Arc::clone(&stop),
            Arc::clone(&count),
        );
        tasks.spawn(async move {
            let mut calls = latency_histogram();
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                publish(producer).await?;
                if measuring.load(Ordering::Relaxed) {
                    calls.saturating_record(started.elapsed().as_nanos() as u64);
                    count.fetch_add(batch as u64, Ordering::Relaxed);
                }
            }
            anyhow::Ok(calls)
        });
    }
    tokio::time::sleep(Duration::from_secs_f64((seconds / 4.0).min(1.0))).await;
    let before = probe();
    measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    let after = probe();
    stop.store(true, Ordering::Relaxed);
    let mut calls = latency_histogram();
    while let Some(done) = tasks.join_next().await {
        calls.add(done??).context("merging histograms")?;
    }
    let window = Window {
        messages: count.load(Ordering::Relaxed),
        seconds: elapsed,
        calls,
    };
    Ok((window, before, after))
}

/// A server on 127.0.0.1 over a fresh broker with the bench queue, and a client of it.
pub(super) struct Remote {
    pub(super) client: Client,
    stop: tokio::sync::oneshot::Sender<()>,
    served: tokio::task::JoinHandle<anyhow::Result<()>>,
    pub(super) fresh: Fresh,
}

impl Remote {
    /// Stops serving and waits until the server has; returns the broker to close.
    pub(super) async fn stop(self) -> anyhow::Result<Fresh> {
        let _ = self.stop.send(());
        self.served.await??;
        Ok(self.fresh)
    }
}

/// Starts a [`Remote`] whose broker lives in a directory named after `scenario` in `base`.
pub(super) async fn start_remote(base: &Path, scenario: &str) -> anyhow::Result<Remote> {
    let fresh = Fresh::empty(base, scenario).await?;
    fresh.broker.create_queue(QUEUE, queue_spec()).await?;
    let listener = ferry_server::bind("127.0.0.1:0".parse().expect("an address")).await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let broker = fresh.broker.clone();
    let served = tokio::spawn(async move {
        ferry_server::serve(broker, listener, async {
            let _ = stopped.await;
        })
        .await?;
        anyhow::Ok(())
    });
    let client = Client::connect(&format!("ferry://{addr}")).await?;
    Ok(Remote {
        client,
        stop,
        served,
        fresh,
    })
}

fn ms(h: &Histogram<u64>, q: f64) -> String {
    format!("{:.2}", h.value_at_quantile(q) as f64 / 1e6)
}

pub fn run(args: &RemoteArgs) -> anyhow::Result<()> {
    let seconds = args.seconds.unwrap_or(if args.quick { 1.0 } else { 5.0 });
    if !(seconds.is_finite() && seconds > 0.0) {
        bail!("--seconds must be a positive number (got {seconds})");
    }
    if args.producers == 0 || args.batch == 0 {
        bail!("--producers and --batch must be at least 1");
    }
    let scratch = scratch_dir(args.dir.as_deref(), "ferry-bench-remote-")?;
    println!("{}", Machine::probe(scratch.path()).line());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(measure(args, seconds, scratch.path()))
}

async fn measure(args: &RemoteArgs, seconds: f64, base: &Path) -> anyhow::Result<()> {
    let mut table = Table::new();
    table.set_header([
        "payload",
        "in-process msgs/s",
        "stream msgs/s",
        "stream / in-process",
        "target",
        "met?",
        "stream batch p50 / p99 / p99.9 ms",
        "unary msgs/s",
        "unary / in-process",
        "unary call p50 / p99 / p99.9 ms",
        "1-message publish p50 / p99 / p99.9 ms",
        "consume + ack msgs/s",
    ]);
    let mut all_met = true;
    // Brokers are closed at the end, once every task that holds one has finished.
    let mut finished = Vec::new();
    for size in [128usize, 1024] {
        // In process.
        let fresh = Fresh::empty(base, &format!("local-{size}")).await?;
        fresh.broker.create_queue(QUEUE, queue_spec()).await?;
        let broker = fresh.broker.clone();
        let body = payload(size);
        let batch = args.batch;
        let chosen_ids = args.chosen_ids;
        let local = window(args.producers, batch, seconds, move |_| {
            let (broker, body) = (broker.clone(), body.clone());
            async move {
                let messages = (0..batch)
                    .map(|_| {
                        let message = OutgoingMessage::new(body.clone());
                        if chosen_ids {
                            message.with_id(chosen_id())
                        } else {
                            message
                        }
                    })
                    .collect();
                broker.publish_batch(QUEUE, messages).await?;
                Ok(())
            }
        })
        .await?;
        finished.push(fresh);

        // Over loopback: each producer on a publish stream of its own, then each making
        // one unary call per batch.
        let remote = start_remote(base, &format!("remote-{size}")).await?;
        let streams: Arc<Vec<_>> = Arc::new(
            (0..args.producers)
                .map(|_| tokio::sync::Mutex::new(remote.client.publish_stream(QUEUE)))
                .collect(),
        );
        let body = payload(size);
        let streamed = window(args.producers, batch, seconds, move |producer| {
            let (streams, body) = (Arc::clone(&streams), body.clone());
            async move {
                let messages = (0..batch).map(|_| Message::new(body.clone())).collect();
                // Only this producer takes its stream's lock: it is never waited for.
                streams[producer].lock().await.publish(messages).await?;
                Ok(())
            }
        })
        .await?;
        let client = remote.client.clone();
        let body = payload(size);
        let unary = window(args.producers, batch, seconds, move |_| {
            let (client, body) = (client.clone(), body.clone());
            async move {
                let messages = (0..batch).map(|_| Message::new(body.clone())).collect();
                client.publish(QUEUE, messages).await?;
                Ok(())
            }
        })
        .await?;
        let client = remote.client.clone();
        let body = payload(size);
        let single = window(1, 1, seconds.min(2.0), move |_| {
            let (client, body) = (client.clone(), body.clone());
            async move {
                client.publish(QUEUE, vec![Message::new(body)]).await?;
                Ok(())
            }
        })
        .await?;

        // Consume and ack what is there, over a stream.
        let stats = remote
            .client
            .describe_queue(QUEUE)
            .await?
            .stats
            .unwrap_or_default();
        let backlog = stats.ready;
        let mut consumer = remote
            .client
            .consumer(
                QUEUE,
                "bench",
                ConsumerConfig {
                    prefetch: 512,
                    ..ConsumerConfig::default()
                },
            )
            .await?;
        let started = Instant::now();
        let deadline = started + Duration::from_secs_f64(seconds);
        let mut consumed = 0u64;
        let mut acks = tokio::task::JoinSet::new();
        while consumed < backlog && Instant::now() < deadline {
            let Some(delivery) = consumer.next().await else {
                break;
            };
            acks.spawn(delivery?.ack());
            while let Some(done) = acks.try_join_next() {
                done??;
                consumed += 1;
            }
        }
        while let Some(done) = acks.join_next().await {
            done??;
            consumed += 1;
        }
        let consume_rate = consumed as f64 / started.elapsed().as_secs_f64();
        consumer.close();
        finished.push(remote.stop().await?);

        let ratio = streamed.rate() / local.rate();
        let unary_ratio = unary.rate() / local.rate();
        let met = ratio >= TARGET_RATIO;
        all_met &= met;
        let mut row = vec![
            format!("{size} B"),
            format!("{:.0}", local.rate()),
            format!("{:.0}", streamed.rate()),
            format!("{ratio:.3}"),
            format!(">= {TARGET_RATIO}"),
            (if met { "yes" } else { "MISS" }).to_owned(),
            format!(
                "{} / {} / {}",
                ms(&streamed.calls, 0.5),
                ms(&streamed.calls, 0.99),
                ms(&streamed.calls, 0.999)
            ),
            format!("{:.0}", unary.rate()),
            format!("{unary_ratio:.3}"),
            format!(
                "{} / {} / {}",
                ms(&unary.calls, 0.5),
                ms(&unary.calls, 0.99),
                ms(&unary.calls, 0.999)
            ),
            format!(
                "{} / {} / {}",
                ms(&single.calls, 0.5),
                ms(&single.calls, 0.99),
                ms(&single.calls, 0.999)
            ),
            format!("{consume_rate:.0}"),
        ];
        if stats.published == 0 {
            row[11] = "-".into();
        }
        table.add_row(row);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(finished);
    for column in 1..=11 {
        if let Some(c) = table.column_mut(column) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    println!(
        "publish: {} producers x batches of {}, Fsync, {seconds} s windows; \
         remote = ferry-client -> ferry-server over 127.0.0.1 (stream: a publish stream \
         per producer; unary: a call per batch); in-process ids: {}",
        args.producers,
        args.batch,
        if args.chosen_ids {
            "chosen by the producers (--chosen-ids)"
        } else {
            "the broker's"
        }
    );
    println!("{table}");
    println!(
        "target: remote publish throughput (publish streams) >= {TARGET_RATIO} x in-process: {}",
        if all_met { "met" } else { "MISS" }
    );
    Ok(())
}
