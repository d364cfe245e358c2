//! Facts about the machine and the output directory's file system, written with every
//! report so a figure is never read without knowing what produced it.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::host;

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
            cores: host::cores(),
            cpu_model: host::cpu_model().unwrap_or_else(|| "unknown".into()),
            memory_gib: host::memory_gib(),
            kernel: host::kernel(),
            fdatasync_per_sec: fdatasync_rate(out_dir, fsync_for).ok(),
            ferry_revision: git_revision(),
            load_1m: host::load_1m(),
        }
    }
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
