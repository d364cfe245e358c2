//! The suites behind the `ferry bench …` subcommands; the `ferry` command parses their
//! arguments and calls in here.
//!
//! `ferry bench storage` (this module): the storage engine measured against the device it
//! runs on, in one run, so every target is checked as a ratio of figures taken under the same
//! conditions. `ferry bench broker` ([`broker`]) shares its machine facts, directory choice
//! and fsync count, and `ferry bench fanout` ([`fanout`]) the broker bench's process figures
//! and fresh brokers. `ferry bench remote` ([`remote`]) and `ferry bench transports`
//! ([`transports`]) put the server and every transport beside the embedded broker, and
//! `ferry bench disk-ratio` ([`disk_ratio`]) the server's publish-ack beside the disk.

pub mod broker;
pub mod checks;
pub mod device;
pub mod disk_ratio;
pub mod fanout;
pub mod fsync_count;
mod json;
pub mod machine;
pub mod pipelined;
pub mod remote;
pub mod reopen;
pub mod report;
pub mod storage;
mod target_check;
pub mod transports;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use hdrhistogram::Histogram;

use machine::Machine;
use storage::Cell;

#[derive(clap::Args, Debug)]
pub struct StorageArgs {
    /// Short run: 0.5 s per cell, 1 s per device test, a 256 MiB log for the reopen check.
    #[arg(long)]
    pub quick: bool,
    /// Where to measure. A scratch directory is made inside it and removed afterwards.
    /// Default: ./target if it exists, else the current directory (never /tmp, which is
    /// often tmpfs and would make every fdatasync free).
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,
    /// Seconds per storage cell (default 2, or 0.5 with --quick).
    #[arg(long, value_name = "N")]
    pub seconds: Option<f64>,
    /// Also write every figure as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Run only the log cells whose label contains SUBSTRING (case-insensitive), e.g.
    /// "Fsync", "pipelined", "1 KiB x64", "/append". Repeatable: a cell runs if any matches.
    /// Labels look like "Fsync 128 B x64 threads" or "Fsync 1 KiB x64 pipelined, 16/append"
    /// (16 records per append). The device limits are always measured.
    #[arg(long, value_name = "SUBSTRING")]
    pub only: Vec<String>,
    /// Skip the reopen-after-unclean-stop check (4).
    #[arg(long)]
    pub no_reopen: bool,
    /// Override the log's `preallocate_bytes` (zeros written ahead of the data under Fsync;
    /// 0 turns preallocation off), to compare the engine with and without it.
    #[arg(long, value_name = "BYTES")]
    pub preallocate_bytes: Option<u64>,
}

/// The matrix cells `--only` selects (all of them without it).
fn selected_cells(only: &[String]) -> anyhow::Result<Vec<Cell>> {
    let all = Cell::matrix();
    if only.is_empty() {
        return Ok(all);
    }
    let wanted: Vec<String> = only.iter().map(|s| s.to_lowercase()).collect();
    let cells: Vec<Cell> = all
        .iter()
        .copied()
        .filter(|c| {
            let label = c.label().to_lowercase();
            wanted.iter().any(|w| label.contains(w.as_str()))
        })
        .collect();
    if cells.is_empty() {
        bail!(
            "--only {only:?} matches no cell; labels look like {:?} or {:?}",
            all[0].label(),
            all[all.len() - 1].label()
        );
    }
    Ok(cells)
}

/// Flushes the file system holding `dir` so that writeback and discards left by the previous
/// step (a deleted gigabyte of log, say) land now rather than inside the next measurement.
fn settle(dir: &Path) -> anyhow::Result<()> {
    let handle = File::open(dir).with_context(|| format!("open {}", dir.display()))?;
    // SAFETY: syncfs only reads the descriptor, which `handle` keeps open for the call.
    if unsafe { libc::syncfs(handle.as_raw_fd()) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("syncfs {}", dir.display()));
    }
    Ok(())
}

/// Where a bench makes its scratch directory: `dir`, created if missing; else ./target if it
/// exists, else the current directory — never /tmp, which is often tmpfs and would make every
/// fdatasync free.
fn bench_base(dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let base = dir.map(Path::to_path_buf).unwrap_or_else(|| {
        let target = PathBuf::from("target");
        if target.is_dir() {
            target
        } else {
            PathBuf::from(".")
        }
    });
    std::fs::create_dir_all(&base).with_context(|| format!("create {}", base.display()))?;
    Ok(base)
}

/// A scratch directory named `prefix…` in the [`bench_base`] of `dir`; removed when closed
/// or dropped.
fn scratch_dir(dir: Option<&Path>, prefix: &str) -> anyhow::Result<tempfile::TempDir> {
    let base = bench_base(dir)?;
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(&base)
        .with_context(|| format!("create a scratch directory in {}", base.display()))
}

/// The machine facts of `dir`, said on stderr before a run that writes there, with a warning
/// when its file system is memory: the figures would then say nothing about a disk.
fn probe_machine(dir: &Path) -> Machine {
    let machine = Machine::probe(dir);
    eprintln!("{}", machine.line());
    if machine.is_memory_backed() {
        eprintln!(
            "warning: {} is on {}: fdatasync costs nothing there, so these figures say nothing about a disk",
            dir.display(),
            machine.fs_type
        );
    }
    machine
}

/// Latencies in nanoseconds from 1 ns to 60 s at three significant digits; longer waits are
/// clamped rather than dropped, so an outlier still counts.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

pub fn run_storage(args: &StorageArgs) -> anyhow::Result<()> {
    fsync_count::install()?;
    let cell_seconds = args.seconds.unwrap_or(if args.quick { 0.5 } else { 2.0 });
    if !(cell_seconds.is_finite() && cell_seconds > 0.0) {
        bail!("--seconds must be a positive number (got {cell_seconds})");
    }
    let device_seconds = if args.quick { 1.0 } else { 2.0 };
    let reopen_bytes: u64 = if args.quick { 256 << 20 } else { 1 << 30 };
    let cells = selected_cells(&args.only)?;

    let scratch = scratch_dir(args.dir.as_deref(), "ferry-bench-")?;
    let dir = scratch.path();

    let machine = probe_machine(dir);

    eprintln!(
        "device limits ({device_seconds} s each) in {}",
        dir.display()
    );
    settle(dir)?;
    let device = device::measure(dir, device_seconds)?;

    let mut results = Vec::with_capacity(cells.len());
    for (i, cell) in cells.iter().enumerate() {
        eprintln!(
            "[{}/{}] {} for {cell_seconds} s",
            i + 1,
            cells.len(),
            cell.label()
        );
        results.push(storage::run_cell(
            dir,
            *cell,
            Duration::from_secs_f64(cell_seconds),
            args.preallocate_bytes,
        )?);
        settle(dir)?;
    }

    let reopen = if args.no_reopen {
        None
    } else {
        eprintln!(
            "reopen after an unclean stop: filling {} MiB in a child process",
            reopen_bytes >> 20
        );
        Some(reopen::measure(&dir.join("reopen"), reopen_bytes)?)
    };

    // The device again: a shared or throttled disk drifts, and a big gap between the two
    // measurements says the ratios below are shaky.
    eprintln!("device limits again, to see drift");
    settle(dir)?;
    let device_end = device::measure(dir, device_seconds)?;

    let run = report::Run {
        machine,
        quick: args.quick,
        cell_seconds,
        device_seconds,
        device,
        device_end,
        cells: results,
        reopen,
    };
    println!("{}", run.machine.line());
    println!("{}", report::table(&run));
    println!("{}", report::legend());
    json::write(args.json.as_deref(), || json::run(&run, &args.only))?;
    scratch.close().context("remove the scratch directory")?;
    Ok(())
}
