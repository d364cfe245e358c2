//! What the engine holds at one moment: resident memory and open files of its process tree
//! (from /proc), and the disk its data directory takes.

use std::path::Path;

use serde::Serialize;

use crate::{host, process};

/// One reading of the engine's resources.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Resources {
    /// Sum of VmRSS over the process tree, in MiB.
    pub rss_mib: f64,
    /// Descriptors open in the process tree (files, sockets, pipes).
    pub open_files: u64,
    /// Blocks allocated under the data directory, in MiB (what `du` shows, so preallocated
    /// segment files count at their full size).
    pub disk_mib: f64,
}

/// Reads the resources of `pid`'s tree and of `data_dir`; a part that cannot be read (no
/// such process, no directory given) reads as zero.
pub fn read(pid: Option<u32>, data_dir: Option<&Path>) -> Resources {
    let tree = pid.map(process::tree_of).unwrap_or_default();
    let rss_kib: u64 = tree
        .iter()
        .filter_map(|p| host::status_kib(*p, "VmRSS:"))
        .sum();
    let open_files = tree.iter().map(|p| open_files(*p)).sum();
    Resources {
        rss_mib: rss_kib as f64 / 1024.0,
        open_files,
        disk_mib: data_dir.map_or(0, disk_bytes) as f64 / (1024.0 * 1024.0),
    }
}

fn open_files(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |entries| entries.count() as u64)
}

/// Allocated bytes under `dir`, recursively; entries that vanish while walking (segments
/// removed by compaction) are skipped.
pub fn disk_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(m) if m.is_dir() => disk_bytes(&entry.path()),
            // st_blocks is in 512-byte units whatever the filesystem's block size.
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_open_files_and_a_written_file_takes_disk() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/data"), vec![7u8; 1 << 20]).unwrap();
        let before = read(Some(std::process::id()), Some(dir.path()));
        assert!(before.rss_mib > 0.0, "{before:?}");
        assert!(before.disk_mib >= 1.0, "{before:?}");
        let held = std::fs::File::open(dir.path().join("sub/data")).unwrap();
        let after = read(Some(std::process::id()), Some(dir.path()));
        assert!(after.open_files > 0, "{after:?}");
        drop(held);
    }

    #[test]
    fn missing_parts_read_as_zero() {
        let r = read(None, None);
        assert_eq!(r.open_files, 0);
        assert_eq!(r.rss_mib, 0.0);
        assert_eq!(r.disk_mib, 0.0);
    }
}
