//! The log under load, one cell at a time: a record size × concurrency × durability × driver
//! × records per append. Concurrency is always N appends in flight; the driver says what keeps
//! them there: N OS threads each blocking in `append` (`threads`), or N `append_then` chains
//! that resubmit from the completion callback with no thread of their own (`pipelined`, see
//! `pipelined.rs`), the way an async broker with many tasks on few threads drives the log.
//! Each append carries one record, except in the batched cells, where it carries
//! `BATCH_RECORDS` (a producer's batch, as Kafka-style clients and Ferry's publish-batch API
//! hand the log).

use std::path::Path;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use ferry_storage::{Durability, Log, LogConfig, NewRecord};
use hdrhistogram::Histogram;

use super::{fsync_count, latency_histogram, pipelined};

pub const RECORD_SIZES: [usize; 3] = [128, 1024, 16 * 1024];
pub const APPENDERS: [usize; 3] = [1, 8, 64];
pub const DURABILITIES: [Durability; 3] = [
    Durability::Fsync,
    Durability::Interval(Duration::from_millis(5)),
    Durability::None,
];

/// Pipelined cells only for these sizes also run with this many appends in flight, to show
/// where group commit goes when offered more concurrency than 64.
pub const WIDE_PIPELINE: usize = 256;
const WIDE_PIPELINE_SIZES: [usize; 2] = [128, 1024];

/// Records per append of the batched cells: `Fsync`, pipelined, x64, for these sizes only.
/// With one record per append, 64 in flight cap a group commit at 64 records (64 KiB of
/// 1 KiB records), well short of what a 1 MiB append + fdatasync moves.
pub const BATCH_RECORDS: usize = 16;
const BATCH_APPENDERS: usize = 64;
const BATCH_SIZES: [usize; 2] = [128, 1024];

/// What keeps the N appends of a cell in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// N OS threads, each looping on the blocking `append`.
    Threads,
    /// N logical appenders without threads: each `append_then` callback resubmits the next.
    Pipelined,
}

impl Driver {
    pub fn name(self) -> &'static str {
        match self {
            Driver::Threads => "threads",
            Driver::Pipelined => "pipelined",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    pub record_bytes: usize,
    /// Appends in flight: threads, or pipelined chains.
    pub appenders: usize,
    pub durability: Durability,
    pub driver: Driver,
    /// Records in each append, all sharing one value buffer; 1 except in the batched cells.
    pub records_per_append: usize,
}

impl Cell {
    /// The full matrix, durability outermost so the table reads mode by mode. `Threads` runs
    /// every cell; `Pipelined` only the `Fsync` ones (where group commit matters), each right
    /// after the `Threads` cell it compares with, plus 256 in flight for the small sizes and,
    /// right after x64 pipelined, the same with `BATCH_RECORDS` records per append.
    pub fn matrix() -> Vec<Cell> {
        let mut cells = Vec::new();
        for durability in DURABILITIES {
            for record_bytes in RECORD_SIZES {
                let cell = |appenders, driver| Cell {
                    record_bytes,
                    appenders,
                    durability,
                    driver,
                    records_per_append: 1,
                };
                let pipelined = durability == Durability::Fsync;
                for appenders in APPENDERS {
                    cells.push(cell(appenders, Driver::Threads));
                    if pipelined {
                        cells.push(cell(appenders, Driver::Pipelined));
                    }
                    if pipelined
                        && appenders == BATCH_APPENDERS
                        && BATCH_SIZES.contains(&record_bytes)
                    {
                        cells.push(Cell {
                            records_per_append: BATCH_RECORDS,
                            ..cell(appenders, Driver::Pipelined)
                        });
                    }
                }
                if pipelined && WIDE_PIPELINE_SIZES.contains(&record_bytes) {
                    cells.push(cell(WIDE_PIPELINE, Driver::Pipelined));
                }
            }
        }
        cells
    }

    /// What `--only` matches against, e.g. `Fsync 128 B x64 pipelined`.
    pub fn label(&self) -> String {
        format!("{} {}", self.durability_name(), self.case_name())
    }

    /// The table's case column, e.g. `128 B x64 threads` or `1 KiB x64 pipelined, 16/append`
    /// (so a filter for the single-record case also selects its batched variant).
    pub fn case_name(&self) -> String {
        format!(
            "{} x{} {}{}",
            self.size_name(),
            self.appenders,
            self.driver.name(),
            self.batch_suffix()
        )
    }

    /// `, 16/append` for a batched cell, empty for single-record appends.
    pub fn batch_suffix(&self) -> String {
        batch_suffix(self.records_per_append)
    }

    pub fn durability_name(&self) -> String {
        durability_name(self.durability)
    }

    pub fn size_name(&self) -> String {
        if self.record_bytes >= 1024 {
            format!("{} KiB", self.record_bytes / 1024)
        } else {
            format!("{} B", self.record_bytes)
        }
    }
}

pub fn batch_suffix(records_per_append: usize) -> String {
    if records_per_append == 1 {
        String::new()
    } else {
        format!(", {records_per_append}/append")
    }
}

/// The records of one append: `n` records, all sharing the one buffer of `value`.
pub(super) fn batch(value: &Bytes, n: usize) -> Vec<NewRecord> {
    vec![NewRecord::new(value.clone()); n]
}

pub fn durability_name(d: Durability) -> String {
    match d {
        Durability::Fsync => "Fsync".into(),
        Durability::Interval(i) => format!("Interval({}ms)", i.as_millis()),
        Durability::None => "None".into(),
    }
}

#[derive(Debug, Clone)]
pub struct CellResult {
    pub cell: Cell,
    /// Completed appends.
    pub appends: u64,
    /// Records in them: `appends` × `cell.records_per_append`.
    pub records: u64,
    pub elapsed: Duration,
    pub fsyncs: u64,
    /// Per-append latency in nanoseconds (submit to completion), all appenders merged.
    pub latency_ns: Histogram<u64>,
}

impl CellResult {
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64()
    }
    /// Payload bytes only: framing and batch headers are the engine's overhead, not output.
    pub fn mb_per_sec(&self) -> f64 {
        self.records_per_sec() * self.cell.record_bytes as f64 / 1e6
    }
    pub fn fsyncs_per_sec(&self) -> f64 {
        self.fsyncs as f64 / self.elapsed.as_secs_f64()
    }
    pub fn latency_us(&self, quantile: f64) -> f64 {
        self.latency_ns.value_at_quantile(quantile) as f64 / 1e3
    }
}

/// Runs one cell in a fresh log under `base`, removing the log afterwards.
pub fn run_cell(
    base: &Path,
    cell: Cell,
    duration: Duration,
    preallocate_bytes: Option<u64>,
) -> anyhow::Result<CellResult> {
    let dir = base.join(format!(
        "log-{}-{}b-{}x-{}-{}r",
        cell.durability_name().replace(['(', ')'], ""),
        cell.record_bytes,
        cell.appenders,
        cell.driver.name(),
        cell.records_per_append
    ));
    let defaults = LogConfig::default();
    let config = LogConfig {
        durability: cell.durability,
        preallocate_bytes: preallocate_bytes.unwrap_or(defaults.preallocate_bytes),
        ..defaults
    };
    let log = Log::open(&dir, config).with_context(|| format!("open log in {}", dir.display()))?;
    // One shared buffer: cloning `Bytes` is a reference count, so the bench measures the log,
    // not the allocator.
    let value = Bytes::from(vec![0x5Au8; cell.record_bytes]);
    let per_append = cell.records_per_append;
    let (log, window) = match cell.driver {
        Driver::Threads => {
            let window = threads(&log, &value, per_append, cell.appenders, duration)?;
            (log, window)
        }
        Driver::Pipelined => pipelined::run(log, value, per_append, cell.appenders, duration)?,
    };
    // Every counted append is `per_append` records of a fresh log, and every append submitted
    // has completed by now: a mismatch means a driver lost or double-counted completions.
    let records = window.appends * per_append as u64;
    let in_log = log.end_offset() - log.start_offset();
    if in_log != records {
        bail!(
            "{}: counted {} appends of {per_append} record(s) = {records} records but the log holds {in_log}",
            cell.label(),
            window.appends
        );
    }
    log.close()
        .with_context(|| format!("close log in {}", dir.display()))?;
    std::fs::remove_dir_all(&dir).with_context(|| format!("remove {}", dir.display()))?;
    Ok(CellResult {
        cell,
        appends: window.appends,
        records,
        // Until the last append that was counted finished, not until the stop flag: the
        // appends in flight at the flag are counted, so their time is too.
        elapsed: window.end - window.start,
        fsyncs: window.fsyncs,
        latency_ns: window.latency_ns,
    })
}

/// What one driver measured in its window.
pub struct Window {
    pub start: Instant,
    /// When the last counted append completed.
    pub end: Instant,
    /// Completed appends (each of the cell's `records_per_append` records).
    pub appends: u64,
    /// The engine's fdatasyncs from `start` until every append in flight had completed.
    pub fsyncs: u64,
    pub latency_ns: Histogram<u64>,
}

/// The `Threads` driver: `appenders` threads, each a blocking `append` loop of `per_append`
/// records per append.
fn threads(
    log: &Log,
    value: &Bytes,
    per_append: usize,
    appenders: usize,
    duration: Duration,
) -> anyhow::Result<Window> {
    let start_line = Barrier::new(appenders + 1);
    let stop = AtomicBool::new(false);

    let (start, fsyncs_before, per_thread) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..appenders)
            .map(|_| s.spawn(|| appender(log, value, per_append, &start_line, &stop)))
            .collect();
        start_line.wait();
        let fsyncs_before = fsync_count::count();
        let start = Instant::now();
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
        let results: Vec<_> = workers
            .into_iter()
            .map(|w| w.join().expect("appender thread panicked"))
            .collect();
        (start, fsyncs_before, results)
    });
    // Read before close: closing syncs and would add an fdatasync outside the measured window.
    let fsyncs = fsync_count::count() - fsyncs_before;

    let mut appends = 0;
    let mut latency_ns = latency_histogram();
    let mut end = start;
    for result in per_thread {
        let (count, hist, last) = result?;
        appends += count;
        latency_ns.add(&hist).expect("histograms share bounds");
        end = end.max(last);
    }
    Ok(Window {
        start,
        end,
        appends,
        fsyncs,
        latency_ns,
    })
}

/// One appender: synchronous appends of `per_append` records until told to stop. Returns how
/// many appends it completed, their latencies and when the last one finished.
fn appender(
    log: &Log,
    value: &Bytes,
    per_append: usize,
    start_line: &Barrier,
    stop: &AtomicBool,
) -> anyhow::Result<(u64, Histogram<u64>, Instant)> {
    let mut hist = latency_histogram();
    let mut count = 0u64;
    start_line.wait();
    let mut last = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        log.append(batch(value, per_append)).context("append")?;
        last = Instant::now();
        hist.saturating_record((last - started).as_nanos() as u64);
        count += 1;
    }
    Ok((count, hist, last))
}
