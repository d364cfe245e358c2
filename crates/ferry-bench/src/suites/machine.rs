//! Facts about the machine and the bench directory's file system, printed with every run so a
//! table is never read without knowing what produced it.

use std::path::{Path, PathBuf};

use crate::host;

#[derive(Debug, Clone)]
pub struct Machine {
    pub cores: usize,
    pub cpu: String,
    pub memory_gib: f64,
    pub kernel: String,
    pub fs_type: String,
    pub fs_source: String,
    pub mount_point: PathBuf,
    /// 1-minute load average when the run started: a busy machine explains noisy figures.
    pub load_1m: f64,
}

impl Machine {
    pub fn probe(bench_dir: &Path) -> Machine {
        let (fs_type, fs_source, mount_point) = mount_of(bench_dir)
            .unwrap_or_else(|| ("unknown".into(), "unknown".into(), bench_dir.to_path_buf()));
        Machine {
            cores: host::cores(),
            cpu: host::cpu_model().unwrap_or_else(|| "unknown CPU".into()),
            memory_gib: host::memory_gib(),
            kernel: host::kernel(),
            fs_type,
            fs_source,
            mount_point,
            load_1m: host::load_1m().unwrap_or(f64::NAN),
        }
    }

    /// A page-cache file system would make every fdatasync free and every figure a lie.
    pub fn is_memory_backed(&self) -> bool {
        matches!(self.fs_type.as_str(), "tmpfs" | "ramfs")
    }

    pub fn line(&self) -> String {
        format!(
            "machine: {} cores ({}), {:.1} GiB memory, Linux {}, bench dir on {} ({} at {}), load {:.2} at start",
            self.cores,
            self.cpu,
            self.memory_gib,
            self.kernel,
            self.fs_type,
            self.fs_source,
            self.mount_point.display(),
            self.load_1m
        )
    }
}

/// The mount holding `path`: the longest mount point in /proc/self/mountinfo that contains
/// it. Returns (file system type, source device, mount point).
fn mount_of(path: &Path) -> Option<(String, String, PathBuf)> {
    let path = path.canonicalize().ok()?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut best: Option<(String, String, PathBuf)> = None;
    for line in info.lines() {
        // "<id> <parent> <maj:min> <root> <mount point> <options> [optional...] - <type> <source> <super options>"
        let (left, right) = line.split_once(" - ")?;
        let mount_point = PathBuf::from(unescape(left.split(' ').nth(4)?));
        let mut right = right.split(' ');
        let (fs_type, source) = (right.next()?, right.next()?);
        let longer = best
            .as_ref()
            .is_none_or(|(_, _, m)| mount_point.as_os_str().len() >= m.as_os_str().len());
        if path.starts_with(&mount_point) && longer {
            best = Some((fs_type.to_string(), unescape(source), mount_point));
        }
    }
    best
}

/// mountinfo writes space, tab, newline and backslash as three-digit octal escapes.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        if bytes[i] == b'\\'
            && let Some(v) = octal
        {
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
