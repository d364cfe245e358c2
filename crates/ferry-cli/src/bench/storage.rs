//! The log under load: N threads, each appending one record per call and waiting for it, for
//! every record size × appender count × durability cell.

use std::path::Path;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use ferry_storage::{Durability, Log, LogConfig, NewRecord};
use hdrhistogram::Histogram;

use super::{fsync_count, latency_histogram};

pub const RECORD_SIZES: [usize; 3] = [128, 1024, 16 * 1024];
pub const APPENDERS: [usize; 3] = [1, 8, 64];
pub const DURABILITIES: [Durability; 3] = [
    Durability::Fsync,
    Durability::Interval(Duration::from_millis(5)),
    Durability::None,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    pub record_bytes: usize,
    pub appenders: usize,
    pub durability: Durability,
}

impl Cell {
    /// The full matrix, durability outermost so the table reads mode by mode.
    pub fn matrix() -> Vec<Cell> {
        let mut cells = Vec::new();
        for durability in DURABILITIES {
            for record_bytes in RECORD_SIZES {
                for appenders in APPENDERS {
                    cells.push(Cell {
                        record_bytes,
                        appenders,
                        durability,
                    });
                }
            }
        }
        cells
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
    pub records: u64,
    pub elapsed: Duration,
    pub fsyncs: u64,
    /// Per-append latency in nanoseconds, all threads merged.
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
pub fn run_cell(base: &Path, cell: Cell, duration: Duration) -> anyhow::Result<CellResult> {
    let dir = base.join(format!(
        "log-{}-{}b-{}x",
        cell.durability_name().replace(['(', ')'], ""),
        cell.record_bytes,
        cell.appenders
    ));
    let config = LogConfig {
        durability: cell.durability,
        ..LogConfig::default()
    };
    let log = Log::open(&dir, config).with_context(|| format!("open log in {}", dir.display()))?;
    // One shared buffer: cloning `Bytes` is a reference count, so the bench measures the log,
    // not the allocator.
    let value = Bytes::from(vec![0x5Au8; cell.record_bytes]);
    let start_line = Barrier::new(cell.appenders + 1);
    let stop = AtomicBool::new(false);

    let (start, fsyncs_before, per_thread) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..cell.appenders)
            .map(|_| s.spawn(|| appender(&log, &value, &start_line, &stop)))
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

    let mut records = 0;
    let mut latency_ns = latency_histogram();
    let mut end = start;
    for result in per_thread {
        let (count, hist, last) = result?;
        records += count;
        latency_ns.add(&hist).expect("histograms share bounds");
        end = end.max(last);
    }
    log.close()
        .with_context(|| format!("close log in {}", dir.display()))?;
    std::fs::remove_dir_all(&dir).with_context(|| format!("remove {}", dir.display()))?;
    Ok(CellResult {
        cell,
        records,
        // Until the last append that was counted finished, not until the stop flag: the
        // appends in flight at the flag are counted, so their time is too.
        elapsed: end - start,
        fsyncs,
        latency_ns,
    })
}

/// One appender: synchronous appends of one record until told to stop. Returns how many it
/// completed, their latencies and when the last one finished.
fn appender(
    log: &Log,
    value: &Bytes,
    start_line: &Barrier,
    stop: &AtomicBool,
) -> anyhow::Result<(u64, Histogram<u64>, Instant)> {
    let mut hist = latency_histogram();
    let mut count = 0u64;
    start_line.wait();
    let mut last = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        log.append(vec![NewRecord::new(value.clone())])
            .context("append")?;
        last = Instant::now();
        hist.saturating_record((last - started).as_nanos() as u64);
        count += 1;
    }
    Ok((count, hist, last))
}
