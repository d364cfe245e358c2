//! Recovery time after an unclean stop. A child process (this same binary: the `ferry`
//! command, through its hidden `bench storage-child-fill` subcommand, which calls
//! [`child_fill`]) fills a log and aborts without closing it, so the parent opens a log whose writer really
//! died mid-flight: no final sync, no final checkpoint, the lock released only by the kernel.
//! Doing it in-process with `mem::forget` would leak the writer thread and keep the lock.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use ferry_storage::{Durability, Log, LogConfig, NewRecord};

const RECORD_BYTES: usize = 64 * 1024;
const RECORDS_PER_APPEND: usize = 16;

#[derive(Debug, Clone)]
pub struct ReopenResult {
    /// Target log size the child was asked for.
    pub target_bytes: u64,
    /// Log size found on reopen.
    pub log_bytes: u64,
    pub open_time: Duration,
    /// Bytes of the active segment recovery had to verify.
    pub scanned_bytes: u64,
    pub segments: usize,
    /// Records the child had acknowledged before it aborted.
    pub acknowledged: u64,
    /// Records the reopened log holds.
    pub recovered: u64,
}

/// Hidden child side: append until the log holds about `bytes`, report the acknowledged
/// count on stdout, then abort. Durability::None keeps the fill fast and, by writing no
/// checkpoint, leaves recovery the whole tail to verify: the worst case.
pub fn child_fill(dir: &Path, bytes: u64) -> anyhow::Result<()> {
    let config = LogConfig {
        durability: Durability::None,
        ..LogConfig::default()
    };
    // Stay inside one segment: a roll would seal the data and checkpoint it, and the reopen
    // would then have almost nothing left to scan.
    if bytes > config.segment_bytes {
        bail!(
            "fill size {bytes} exceeds one segment ({})",
            config.segment_bytes
        );
    }
    let log = Log::open(dir, config).with_context(|| format!("open log in {}", dir.display()))?;
    let value = Bytes::from(vec![0x3Cu8; RECORD_BYTES]);
    let batch: Vec<NewRecord> = (0..RECORDS_PER_APPEND)
        .map(|_| NewRecord::new(value.clone()))
        .collect();
    let batch_bytes = (ferry_storage::batch::HEADER_LEN
        + batch.iter().map(NewRecord::encoded_len).sum::<usize>()) as u64;
    let mut written = 0u64;
    let mut acknowledged = 0u64;
    while written + batch_bytes <= bytes {
        let appended = log.append(batch.clone()).context("append")?;
        acknowledged = appended.last_offset + 1;
        written += batch_bytes;
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "acknowledged {acknowledged}")?;
    out.flush()?;
    // No close, no drop: the writer thread dies with the process like in a crash.
    std::process::abort();
}

/// Parent side: run the child, then time `Log::open` on what it left behind.
pub fn measure(dir: &Path, bytes: u64) -> anyhow::Result<ReopenResult> {
    let exe = std::env::current_exe().context("locate the ferry binary")?;
    let output = Command::new(&exe)
        .args(["bench", "storage-child-fill"])
        .arg(dir)
        .arg(bytes.to_string())
        .output()
        .with_context(|| format!("run {} bench storage-child-fill", exe.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if output.status.signal() != Some(libc::SIGABRT) {
        bail!(
            "fill child should have aborted but ended with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let acknowledged: u64 = stdout
        .trim()
        .strip_prefix("acknowledged ")
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("fill child printed {stdout:?}"))?;

    let config = LogConfig {
        durability: Durability::None,
        ..LogConfig::default()
    };
    let started = Instant::now();
    let log = Log::open(dir, config).with_context(|| format!("reopen {}", dir.display()))?;
    let open_time = started.elapsed();
    let report = log.recovery_report();
    let result = ReopenResult {
        target_bytes: bytes,
        log_bytes: log.size_bytes(),
        open_time,
        scanned_bytes: report.scanned_bytes,
        segments: report.segments,
        acknowledged,
        recovered: log.end_offset() - log.start_offset(),
    };
    log.close().context("close reopened log")?;
    std::fs::remove_dir_all(dir).with_context(|| format!("remove {}", dir.display()))?;
    Ok(result)
}
