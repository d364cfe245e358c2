//! Facts about this host read from /proc, shared by the workload harness's machine record
//! and the `ferry bench` suites' machine line.

/// The CPU model from /proc/cpuinfo.
pub fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// Total memory in GiB, 0 when unknown.
pub fn memory_gib() -> f64 {
    mem_total_kib().map_or(0.0, |k| k as f64 / (1024.0 * 1024.0))
}

fn mem_total_kib() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The kernel release, "unknown" when unreadable.
pub fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// The 1-minute load average: a busy machine explains noisy figures.
pub fn load_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
}

/// A `KEY: N kB` field of a /proc/PID/status file, e.g. `VmRSS:`.
pub fn status_kib(pid: u32, key: &str) -> Option<u64> {
    status_file_kib(&format!("/proc/{pid}/status"), key)
}

/// The same field of this process's own status.
pub fn own_status_kib(key: &str) -> Option<u64> {
    status_file_kib("/proc/self/status", key)
}

fn status_file_kib(path: &str, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(path).ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}
