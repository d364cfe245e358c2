//! The device's own limits, measured with plain files in the bench directory. The log's figures
//! are only meaningful as fractions of these: a log cannot sync more often, or stream durable
//! bytes faster, than the file system under it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;

use super::latency_histogram;

/// One plain-file loop: `write` a block at the end of a file, `fdatasync`, repeat.
#[derive(Debug, Clone)]
pub struct SyncLoop {
    pub block_bytes: usize,
    pub cycles: u64,
    pub elapsed: Duration,
    /// Latency of the fdatasync call alone, in nanoseconds.
    pub fdatasync_ns: Histogram<u64>,
}

impl SyncLoop {
    pub fn cycles_per_sec(&self) -> f64 {
        self.cycles as f64 / self.elapsed.as_secs_f64()
    }
    pub fn mb_per_sec(&self) -> f64 {
        (self.cycles * self.block_bytes as u64) as f64 / 1e6 / self.elapsed.as_secs_f64()
    }
    pub fn fdatasync_us(&self, quantile: f64) -> f64 {
        self.fdatasync_ns.value_at_quantile(quantile) as f64 / 1e3
    }
}

#[derive(Debug, Clone)]
pub struct DeviceLimits {
    /// (a) 4 KiB appending writes, each followed by fdatasync.
    pub small: SyncLoop,
    /// 64 KiB appending writes, each followed by fdatasync: the size of a full group of
    /// 64 × 1 KiB records, so the device's own ceiling for what check (1) measures.
    pub group: SyncLoop,
    /// (b) 1 MiB appending writes, each followed by fdatasync.
    pub sequential: SyncLoop,
}

/// A full group commit of 64 appenders × 1 KiB records, framing aside.
pub const GROUP_BLOCK_BYTES: usize = 64 << 10;

/// Stop the 64 KiB and 1 MiB loops at this size even if time is left, so as not to fill a
/// small disk. The loops otherwise run as long as a storage cell does: virtual disks here take
/// the first few hundred MiB into a write cache at several times their sustained rate (seen:
/// 256 MiB in 0.15 s, then 256 MiB per 0.8 s), and a burst is no reference for a cell that
/// writes for seconds.
const SEQUENTIAL_CAP_BYTES: u64 = 8 << 30;

pub fn measure(dir: &Path, seconds: f64) -> anyhow::Result<DeviceLimits> {
    let duration = Duration::from_secs_f64(seconds);
    let small = sync_loop(&dir.join("device-4k"), 4096, duration, u64::MAX)?;
    let group = sync_loop(
        &dir.join("device-64k"),
        GROUP_BLOCK_BYTES,
        duration,
        SEQUENTIAL_CAP_BYTES,
    )?;
    let sequential = sync_loop(
        &dir.join("device-1m"),
        1 << 20,
        duration,
        SEQUENTIAL_CAP_BYTES,
    )?;
    Ok(DeviceLimits {
        small,
        group,
        sequential,
    })
}

/// Bytes written to the block device `source` (e.g. `/dev/vda`) since it came up: what the
/// disk got, file system journal included, and anything else writing to it meanwhile.
/// `None` where /sys does not say (not a block device, not Linux).
pub fn written_bytes(source: &str) -> Option<u64> {
    let name = Path::new(source).file_name()?.to_str()?;
    let stat = std::fs::read_to_string(format!("/sys/class/block/{name}/stat")).ok()?;
    // The seventh field counts 512-byte sectors written, whatever the device's block size.
    let sectors: u64 = stat.split_whitespace().nth(6)?.parse().ok()?;
    Some(sectors * 512)
}

/// Writes `block_bytes` at the end of a new file at `path` and fdatasyncs, over and over,
/// until `duration` has passed or `cap_bytes` are written; then removes the file.
///
/// Appending (not overwriting) on purpose: that is what the log does, and an appending
/// fdatasync must also persist the new file size, which costs a journal commit on most
/// file systems.
pub fn sync_loop(
    path: &Path,
    block_bytes: usize,
    duration: Duration,
    cap_bytes: u64,
) -> anyhow::Result<SyncLoop> {
    let mut file: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("create {}", path.display()))?;
    // Non-zero bytes, so no layer can take a shortcut for zero pages.
    let block = vec![0xA5u8; block_bytes];
    let mut hist = latency_histogram();
    let mut cycles = 0u64;
    let start = Instant::now();
    while start.elapsed() < duration && cycles * (block_bytes as u64) < cap_bytes {
        file.write_all(&block)
            .with_context(|| format!("write {}", path.display()))?;
        let synced = Instant::now();
        // `sync_data` is fdatasync(2) on Linux.
        file.sync_data()
            .with_context(|| format!("fdatasync {}", path.display()))?;
        hist.saturating_record(synced.elapsed().as_nanos() as u64);
        cycles += 1;
    }
    let elapsed = start.elapsed();
    drop(file);
    std::fs::remove_file(path).with_context(|| format!("remove {}", path.display()))?;
    Ok(SyncLoop {
        block_bytes,
        cycles,
        elapsed,
        fdatasync_ns: hist,
    })
}
