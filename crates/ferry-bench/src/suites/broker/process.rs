//! What this process itself uses: resident memory from /proc/self/status and CPU time from
//! getrusage. The broker is embedded, so the process's memory is the broker's memory (plus
//! the bench's own, which is small and constant: counters and histograms).

use crate::host;

/// Resident memory, from /proc/self/status.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    /// VmRSS: resident now.
    pub rss_bytes: u64,
    /// VmHWM: the peak of VmRSS since the process started or since [`reset_peak`].
    pub peak_bytes: u64,
}

/// `None` where /proc is missing or unreadable (not Linux).
pub fn memory() -> Option<Memory> {
    Some(Memory {
        rss_bytes: host::own_status_kib("VmRSS:")? * 1024,
        peak_bytes: host::own_status_kib("VmHWM:")? * 1024,
    })
}

/// Resets VmHWM to the current VmRSS (Linux ≥ 4.0), so the next peak read belongs to one
/// scenario rather than to whatever ran before it. Returns whether the kernel took it; when
/// not, the peak is since the process started, and the report says so.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// User plus system CPU seconds of the whole process (all threads: the runtime's workers and
/// the storage engine's writer and completer threads).
pub fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole rusage into the pointer it is given, which points to
    // zeroed memory of the right size that lives until it returns.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } != 0 {
        return f64::NAN;
    }
    // SAFETY: getrusage returned 0, so it filled the struct (and zeroed memory is a valid
    // rusage anyway: it is plain integers).
    let usage = unsafe { usage.assume_init() };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// `1.23 GiB` or `456 MiB`.
pub fn bytes(v: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    if v >= 1 << 30 {
        format!("{:.2} GiB", v as f64 / GIB)
    } else {
        format!("{} MiB", v >> 20)
    }
}
