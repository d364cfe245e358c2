//! Log directories the `recovery_scan` fuzz target (crates/ferry-storage/fuzz) found
//! mishandled, replayed from `tests/data/fuzz-*`, the files exactly as the target wrote
//! them. Each test says what went wrong before its fix.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use ferry_storage::{Durability, Log, LogConfig, StorageError};

/// The fuzz target's limits.
fn fuzz_config(repair: bool) -> LogConfig {
    LogConfig {
        durability: Durability::Fsync,
        segment_bytes: 4096,
        segment_max_age: None,
        index_interval_bytes: 256,
        max_record_bytes: 4096,
        max_batch_bytes: 4096,
        max_headers: 16,
        max_group_bytes: 4096,
        checkpoint_interval: Duration::from_secs(3600),
        index_cache_segments: 2,
        preallocate_bytes: 0,
        repair,
    }
}

/// A copy of `tests/data/<name>` in a temporary directory.
fn replay(name: &str) -> tempfile::TempDir {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    dir
}

/// Every file's name and contents, to show that a refusal changed nothing.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

/// A sealed segment at base 0 whose first batch is damaged but which holds, further on,
/// intact batches with offsets from 4, while the next segment starts at 2. Repair kept those
/// batches: the log opened with its end at 2 and reads returned offset 4 from the first
/// segment. Two segments claiming the same offsets is refused with repair as without it,
/// before anything is quarantined or rewritten.
#[test]
fn repair_refuses_a_sealed_segment_whose_salvaged_batches_overlap_the_next_segment() {
    let dir = replay("fuzz-repair-overlapping-segments");
    let before = snapshot(dir.path());
    for repair in [false, true] {
        match Log::open(dir.path(), fuzz_config(repair)) {
            Err(StorageError::CorruptLog { file, lost, .. }) => {
                assert!(file.ends_with("00000000000000000000.log"), "{file:?}");
                // Without repair the damaged first batch is the refusal's cause; with it,
                // the overlap with the next segment.
                let expected_start = if repair { 2 } else { 0 };
                assert_eq!(lost.start, expected_start, "repair {repair}: {lost:?}");
            }
            Err(other) => panic!("repair {repair}: {other}"),
            Ok(log) => panic!(
                "repair {repair}: opened with offsets {}..{}",
                log.start_offset(),
                log.end_offset()
            ),
        }
        let mut after = snapshot(dir.path());
        // The open takes the directory lock through a file of its own.
        after.retain(|name, _| before.contains_key(name));
        assert_eq!(after, before, "repair {repair} changed the directory");
        assert!(!dir.path().join("quarantine").exists());
    }
}
