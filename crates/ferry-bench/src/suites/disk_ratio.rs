//! `ferry bench disk-ratio`: the server's publish-ack rate for 1 KiB messages as a share of
//! what the disk under its data directory can take, both measured in one run on the same
//! file system. Rounds alternate the two:
//!
//! - **raw**: 1 MiB appending writes with an fdatasync after each, into a file in the
//!   server's data directory, for a fixed number of MiB (the disk's sequential bandwidth
//!   with a sync per MiB, as `ferry bench storage` measures it, see [`device::sync_loop`]);
//! - **server**: producers publish batches of 1 KiB messages through `ferry-client` to a
//!   `ferry-server` on 127.0.0.1, each call acknowledged after the broker's `Fsync` append
//!   (the server's default durability), for a fixed window.
//!
//! The target is median server payload MB/s ≥ 0.5 × median raw MB/s. Alternating rounds,
//! and comparing medians, keeps a shared disk's drift from deciding it. Beside the payload
//! rate each server round reports what explains it: the block device's own write rate, the
//! engine's fdatasyncs (so the bytes one sync carries) and the CPU the process used.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use comfy_table::{CellAlignment, Table};
use ferry_client::Message;

use super::broker::process;
use super::machine::Machine;
use super::remote::{QUEUE, Remote, Window, payload, probed_window, start_remote};
use super::{device, fsync_count, probe_machine, scratch_dir, settle};

/// Server payload MB/s over raw sequential MB/s, at least.
pub const TARGET_RATIO: f64 = 0.5;
/// The payload of every message: the target is stated for 1 KiB messages.
pub const MESSAGE_BYTES: usize = 1024;
/// The raw loop's block: one fdatasync per MiB.
const RAW_BLOCK_BYTES: usize = 1 << 20;
/// The raw loop stops at its byte count; this only bounds a disk that has stalled.
const RAW_TIME_LIMIT: Duration = Duration::from_secs(600);

#[derive(clap::Args, Debug)]
pub struct DiskRatioArgs {
    /// Short run: 2 rounds of 256 MiB raw and 1 s of publishing.
    #[arg(long)]
    pub quick: bool,
    /// Where to put the server's data directory (a scratch directory inside it is removed
    /// afterwards). Default: ./target if it exists, else the current directory.
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,
    /// Rounds, each one raw loop then one server window (default 3, or 2 with --quick).
    #[arg(long, value_name = "N")]
    pub rounds: Option<usize>,
    /// MiB the raw loop writes per round (default 512, or 256 with --quick).
    #[arg(long, value_name = "MIB")]
    pub raw_mib: Option<u64>,
    /// Seconds of each server publish window (default 3, or 1 with --quick).
    #[arg(long, value_name = "N")]
    pub seconds: Option<f64>,
    /// Concurrent publishers.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub producers: usize,
    /// Messages per publish call. With 16 producers, 256 keep up to 4 MiB of payload in
    /// flight: enough for the broker to form syncs of about 1 MiB, as the raw loop does.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub batch: usize,
}

/// What a run is asked to do, defaults resolved.
#[derive(Debug, Clone)]
pub struct Plan {
    pub rounds: usize,
    pub raw_bytes: u64,
    pub seconds: f64,
    pub producers: usize,
    pub batch: usize,
}

impl Plan {
    pub fn from_args(args: &DiskRatioArgs) -> anyhow::Result<Plan> {
        let quick = args.quick;
        let plan = Plan {
            rounds: args.rounds.unwrap_or(if quick { 2 } else { 3 }),
            raw_bytes: args.raw_mib.unwrap_or(if quick { 256 } else { 512 }) << 20,
            seconds: args.seconds.unwrap_or(if quick { 1.0 } else { 3.0 }),
            producers: args.producers,
            batch: args.batch,
        };
        if plan.rounds == 0 || plan.raw_bytes == 0 || plan.producers == 0 || plan.batch == 0 {
            bail!("--rounds, --raw-mib, --producers and --batch must be at least 1");
        }
        if !(plan.seconds.is_finite() && plan.seconds > 0.0) {
            bail!("--seconds must be a positive number (got {})", plan.seconds);
        }
        Ok(plan)
    }
}

/// One raw loop.
#[derive(Debug, Clone)]
pub struct RawRound {
    pub mb_per_sec: f64,
    pub seconds: f64,
    /// The block device's write rate over the loop, where /sys says.
    pub device_mb_per_sec: Option<f64>,
    pub fdatasync_p50_us: f64,
}

/// One server publish window.
#[derive(Debug, Clone)]
pub struct ServerRound {
    pub messages: u64,
    pub seconds: f64,
    /// fdatasyncs the storage engine made in the window.
    pub fsyncs: u64,
    /// CPU seconds of the whole process (client, server and broker) in the window.
    pub cpu_seconds: f64,
    /// Bytes the block device got in the window, where /sys says.
    pub device_bytes: Option<u64>,
    pub call_p50_ms: f64,
    pub call_p99_ms: f64,
}

impl ServerRound {
    pub fn msgs_per_sec(&self) -> f64 {
        self.messages as f64 / self.seconds
    }
    /// Payload bytes only, as the raw loop counts only what it asked to write.
    pub fn mb_per_sec(&self) -> f64 {
        self.msgs_per_sec() * MESSAGE_BYTES as f64 / 1e6
    }
    pub fn device_mb_per_sec(&self) -> Option<f64> {
        self.device_bytes.map(|b| b as f64 / 1e6 / self.seconds)
    }
    /// What the disk got per message: payload, record framing, the file system's journal.
    pub fn device_bytes_per_message(&self) -> Option<f64> {
        self.device_bytes
            .map(|b| b as f64 / self.messages.max(1) as f64)
    }
    pub fn fsyncs_per_sec(&self) -> f64 {
        self.fsyncs as f64 / self.seconds
    }
    /// Payload KiB one fdatasync made durable: how large the broker's groups were.
    pub fn kib_per_fsync(&self) -> f64 {
        (self.messages * MESSAGE_BYTES as u64) as f64 / 1024.0 / self.fsyncs.max(1) as f64
    }
    /// Cores busy on average: 2.0 on a 2-core machine means CPU-bound.
    pub fn cpu_cores(&self) -> f64 {
        self.cpu_seconds / self.seconds
    }
}

#[derive(Debug, Clone)]
pub struct Report {
    pub raw: Vec<RawRound>,
    pub server: Vec<ServerRound>,
    /// What the queue says was published over the whole run, warm-ups included.
    pub queue_published: u64,
}

impl Report {
    pub fn raw_median(&self) -> f64 {
        median(self.raw.iter().map(|r| r.mb_per_sec))
    }
    pub fn server_median(&self) -> f64 {
        median(self.server.iter().map(ServerRound::mb_per_sec))
    }
    pub fn ratio(&self) -> f64 {
        self.server_median() / self.raw_median()
    }
    pub fn met(&self) -> bool {
        self.ratio() >= TARGET_RATIO
    }
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

pub fn run(args: &DiskRatioArgs) -> anyhow::Result<()> {
    let plan = Plan::from_args(args)?;
    fsync_count::install()?;
    let scratch = scratch_dir(args.dir.as_deref(), "ferry-bench-disk-ratio-")?;
    let machine = probe_machine(scratch.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start the tokio runtime")?;
    let report = runtime.block_on(measure(&plan, scratch.path(), &machine))?;
    println!("{}", machine.line());
    print(&plan, &report);
    scratch.close().context("remove the scratch directory")?;
    Ok(())
}

/// Runs `plan.rounds` rounds against one server whose broker lives under `base`. Needs
/// [`fsync_count::install`] first for the fdatasync figures (they read 0 without it).
pub async fn measure(plan: &Plan, base: &Path, machine: &Machine) -> anyhow::Result<Report> {
    let remote = start_remote(base, "disk-ratio").await?;
    let mut raw = Vec::with_capacity(plan.rounds);
    let mut server = Vec::with_capacity(plan.rounds);
    let mut counted = 0;
    for round in 1..=plan.rounds {
        eprintln!(
            "[{round}/{}] raw: {} MiB in 1 MiB writes + fdatasync",
            plan.rounds,
            plan.raw_bytes >> 20
        );
        raw.push(raw_round(
            remote.fresh.path(),
            plan.raw_bytes,
            &machine.fs_source,
        )?);
        eprintln!(
            "[{round}/{}] server: {} producers x batches of {} x {MESSAGE_BYTES} B for {} s",
            plan.rounds, plan.producers, plan.batch, plan.seconds
        );
        let round = server_round(&remote, plan, &machine.fs_source).await?;
        counted += round.messages;
        server.push(round);
    }
    let stats = remote
        .client
        .describe_queue(QUEUE)
        .await?
        .stats
        .unwrap_or_default();
    // The windows count only calls acknowledged inside them; the queue also holds the
    // warm-ups' and the calls in flight at each window's end, never fewer.
    if stats.published < counted {
        bail!(
            "counted {counted} messages acknowledged, but the queue says {} were published",
            stats.published
        );
    }
    remote.stop().await?.close().await?;
    Ok(Report {
        raw,
        server,
        queue_published: stats.published,
    })
}

/// The raw limit, in the server's data directory so on its file system.
fn raw_round(dir: &Path, bytes: u64, device_source: &str) -> anyhow::Result<RawRound> {
    // What the server left unwritten lands now, not inside the loop.
    settle(dir)?;
    let device_before = device::written_bytes(device_source);
    let started = Instant::now();
    let sync = device::sync_loop(
        &dir.join("raw-limit"),
        RAW_BLOCK_BYTES,
        RAW_TIME_LIMIT,
        bytes,
    )?;
    let elapsed = started.elapsed().as_secs_f64();
    let device_mb_per_sec = device_before
        .zip(device::written_bytes(device_source))
        .map(|(a, b)| (b - a) as f64 / 1e6 / elapsed);
    Ok(RawRound {
        mb_per_sec: sync.mb_per_sec(),
        seconds: sync.elapsed.as_secs_f64(),
        device_mb_per_sec,
        fdatasync_p50_us: sync.fdatasync_us(0.5),
    })
}

/// Counters read at the edges of a server window.
struct Edge {
    fsyncs: u64,
    cpu_seconds: f64,
    device_bytes: Option<u64>,
}

async fn server_round(
    remote: &Remote,
    plan: &Plan,
    device_source: &str,
) -> anyhow::Result<ServerRound> {
    settle(remote.fresh.path())?;
    let client = remote.client.clone();
    let body = payload(MESSAGE_BYTES);
    let batch = plan.batch;
    let source = device_source.to_owned();
    let (window, before, after): (Window, Edge, Edge) = probed_window(
        plan.producers,
        batch,
        plan.seconds,
        move |_| {
            let (client, body) = (client.clone(), body.clone());
            async move {
                let messages = (0..batch).map(|_| Message::new(body.clone())).collect();
                client.publish(QUEUE, messages).await?;
                Ok(())
            }
        },
        move || Edge {
            fsyncs: fsync_count::count(),
            cpu_seconds: process::cpu_seconds(),
            device_bytes: device::written_bytes(&source),
        },
    )
    .await?;
    let ms = |q| window.calls.value_at_quantile(q) as f64 / 1e6;
    Ok(ServerRound {
        messages: window.messages,
        seconds: window.seconds,
        fsyncs: after.fsyncs - before.fsyncs,
        cpu_seconds: after.cpu_seconds - before.cpu_seconds,
        device_bytes: before
            .device_bytes
            .zip(after.device_bytes)
            .map(|(a, b)| b - a),
        call_p50_ms: ms(0.5),
        call_p99_ms: ms(0.99),
    })
}

fn optional(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

fn print(plan: &Plan, report: &Report) {
    println!(
        "raw: {} MiB per round in 1 MiB appending writes, fdatasync after each; \
         server: {} producers x batches of {} x {MESSAGE_BYTES} B, Fsync, {} s windows, \
         ferry-client -> ferry-server over 127.0.0.1",
        plan.raw_bytes >> 20,
        plan.producers,
        plan.batch,
        plan.seconds
    );
    let mut table = Table::new();
    table.set_header([
        "round",
        "raw MB/s",
        "raw device MB/s",
        "raw fdatasync p50 us",
        "server msgs/s",
        "server payload MB/s",
        "server device MB/s",
        "device B / msg",
        "fdatasyncs/s",
        "payload KiB / fdatasync",
        "CPU cores busy",
        "call p50 / p99 ms",
    ]);
    for (i, (raw, server)) in report.raw.iter().zip(&report.server).enumerate() {
        table.add_row([
            (i + 1).to_string(),
            format!("{:.0}", raw.mb_per_sec),
            optional(raw.device_mb_per_sec, 0),
            format!("{:.0}", raw.fdatasync_p50_us),
            format!("{:.0}", server.msgs_per_sec()),
            format!("{:.0}", server.mb_per_sec()),
            optional(server.device_mb_per_sec(), 0),
            optional(server.device_bytes_per_message(), 0),
            format!("{:.0}", server.fsyncs_per_sec()),
            format!("{:.0}", server.kib_per_fsync()),
            format!("{:.2}", server.cpu_cores()),
            format!("{:.2} / {:.2}", server.call_p50_ms, server.call_p99_ms),
        ]);
    }
    for column in 1..=11 {
        if let Some(c) = table.column_mut(column) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    println!("{table}");
    println!(
        "target: median server payload MB/s >= {TARGET_RATIO} x median raw MB/s: {:.0} / {:.0} = {:.3}: {}",
        report.server_median(),
        report.raw_median(),
        report.ratio(),
        if report.met() { "MET" } else { "MISS" }
    );
    println!(
        "note: device MB/s are the block device's sectors written (/sys/class/block/*/stat) over \
         the same seconds, file system journal and any other writer to that device included; \
         the queue holds {} messages published in the run, warm-ups included.",
        report.queue_published
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_run_fills_every_figure_and_accounts_for_the_messages() {
        fsync_count::install().unwrap();
        // Any file system will do: the engine counts its fdatasyncs whether or not they
        // reach a disk, and no figure is checked against a speed.
        let base = tempfile::tempdir().unwrap();
        let machine = Machine::probe(base.path());
        let plan = Plan {
            rounds: 2,
            raw_bytes: 4 << 20,
            seconds: 0.3,
            producers: 2,
            batch: 16,
        };
        let report = measure(&plan, base.path(), &machine).await.unwrap();

        assert_eq!(report.raw.len(), 2);
        assert_eq!(report.server.len(), 2);
        for raw in &report.raw {
            assert!(raw.mb_per_sec > 0.0 && raw.mb_per_sec.is_finite());
            assert!(raw.fdatasync_p50_us > 0.0);
        }
        let counted: u64 = report.server.iter().map(|s| s.messages).sum();
        for server in &report.server {
            assert!(server.messages > 0, "every window acknowledged publishes");
            assert!(server.fsyncs > 0, "Fsync durability syncs");
            assert!(server.mb_per_sec() > 0.0);
            assert!(server.cpu_seconds >= 0.0);
            if let Some(per_message) = server.device_bytes_per_message() {
                assert!(per_message >= 0.0);
            }
        }
        assert!(report.queue_published >= counted);
        assert!(report.ratio() > 0.0 && report.ratio().is_finite());
        assert_eq!(report.met(), report.ratio() >= TARGET_RATIO);
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), 2.0);
        assert_eq!(median([4.0, 1.0, 3.0, 2.0].into_iter()), 2.5);
        assert!(median(std::iter::empty()).is_nan());
    }
}
