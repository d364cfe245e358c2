//! What an engine's server process spent on a run, read from /proc: CPU seconds (user +
//! system, of the process and every descendant, so a broker that forks workers is counted
//! whole) and peak resident memory.

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use crate::host::status_kib;

/// CPU time and peak memory of a process tree at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub cpu_secs: f64,
}

/// What a run cost the process tree.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Usage {
    pub cpu_secs: f64,
    /// Sum of VmHWM over the tree, in MiB.
    pub peak_rss_mib: f64,
    /// Whether the peak was reset before the run (writing 5 to `clear_refs`); if not, it is
    /// the peak since the process started.
    pub peak_since_run_start: bool,
}

/// A process tree watched over one run.
#[derive(Debug)]
pub struct Watch {
    pid: u32,
    before: Sample,
    reset: bool,
}

impl Watch {
    /// Starts watching `pid`: resets its peak RSS when permitted and samples its CPU time.
    pub fn start(pid: u32) -> std::io::Result<Watch> {
        let tree = tree_of(pid);
        if tree.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no process {pid}"),
            ));
        }
        // Writing 5 resets VmHWM to the current RSS (Linux ≥ 4.0); it needs the right to
        // write the process's /proc files, which another user's server may refuse.
        let reset = tree
            .iter()
            .all(|p| std::fs::write(format!("/proc/{p}/clear_refs"), "5").is_ok());
        Ok(Watch {
            pid,
            before: sample(&tree),
            reset,
        })
    }

    pub fn finish(&self) -> Usage {
        let tree = tree_of(self.pid);
        let after = sample(&tree);
        let peak_kib: u64 = tree.iter().filter_map(|p| status_kib(*p, "VmHWM:")).sum();
        Usage {
            cpu_secs: (after.cpu_secs - self.before.cpu_secs).max(0.0),
            peak_rss_mib: peak_kib as f64 / 1024.0,
            peak_since_run_start: self.reset,
        }
    }
}

fn sample(tree: &[u32]) -> Sample {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let total: u64 = tree.iter().filter_map(|p| cpu_ticks(*p)).sum();
    Sample {
        cpu_secs: total as f64 / ticks,
    }
}

/// `pid` and every live descendant.
pub fn tree_of(pid: u32) -> Vec<u32> {
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return Vec::new();
    }
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(parent) = stat_fields(child).and_then(|f| f.get(1)?.parse().ok()) {
                children.entry(parent).or_default().push(child);
            }
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        if let Some(kids) = children.get(&parent) {
            tree.extend(kids.iter().copied().filter(|k| *k != parent));
        }
        i += 1;
    }
    tree
}

/// The fields of /proc/PID/stat after the command name (which may hold spaces): index 0 is
/// the state, 1 the parent pid, 11 utime and 12 stime.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    Some(after_name.split_whitespace().map(str::to_owned).collect())
}

fn cpu_ticks(pid: u32) -> Option<u64> {
    let fields = stat_fields(pid)?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_watched_and_its_cpu_time_rises_with_work() {
        let watch = Watch::start(std::process::id()).unwrap();
        let started = std::time::Instant::now();
        let mut x = 0u64;
        while started.elapsed() < std::time::Duration::from_millis(150) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let usage = watch.finish();
        assert!(usage.cpu_secs > 0.0, "{usage:?}");
        assert!(usage.peak_rss_mib > 0.0, "{usage:?}");
    }

    #[test]
    fn a_missing_process_is_an_error() {
        assert!(Watch::start(u32::MAX - 1).is_err());
    }
}
