//! Facts about the machine and the output directory's file system, written with every
//! report so a figure is never read without knowing what produced it.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cores: usize,
    pub cpu_model: String,
    pub memory_gib: f64,
    pub kernel: String,
    /// 4 KiB appending writes each followed by fdatasync, per second, on the output
    /// directory's file system: the durable-write ceiling a disk-backed engine there meets.
    pub fdatasync_per_sec: Option<f64>,
    /// `git rev-parse HEAD` where the bench was run, when it is a git checkout.
    pub ferry_revision: Option<String>,
    pub load_1m: Option<f64>,
}

impl Machine {
    pub fn probe(out_dir: &Path, fsync_for: Duration) -> Machine {
        Machine {
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model: cpu_model().unwrap_or_else(|| "unknown".into()),
            memory_gib: mem_total_kib().map_or(0.0, |k| k as f64 / (1024.0 * 1024.0)),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            fdatasync_per_sec: fdatasync_rate(out_dir, fsync_for).ok(),
            ferry_revision: git_revision(),
            load_1m: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|l| l.split_whitespace().next()?.parse().ok()),
        }
    }
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

fn mem_total_kib() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Appending (not overwriting) on purpose: an appending fdatasync must also persist the new
/// file size, as an engine's log does.
fn fdatasync_rate(dir: &Path, duration: Duration) -> std::io::Result<f64> {
    let path = dir.join(format!(".fdatasync-probe-{}", std::process::id()));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    let block = [0xA5u8; 4096];
    let mut cycles = 0u64;
    let started = Instant::now();
    let result = (|| {
        while started.elapsed() < duration || cycles == 0 {
            file.write_all(&block)?;
            file.sync_data()?;
            cycles += 1;
        }
        Ok(cycles as f64 / started.elapsed().as_secs_f64())
    })();
    drop(file);
    std::fs::remove_file(&path)?;
    result
}

fn git_revision() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}
