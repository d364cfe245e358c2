//! A log of many segments holds a bounded number of file descriptors: only the active
//! segment and the sealed segments whose index is cached keep theirs open. (Its own test
//! binary: the count is of the whole process.)

mod common;

use common::*;
use ferry_storage::{Log, LogConfig};

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn reading_a_log_of_hundreds_of_segments_keeps_descriptors_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 4096,
        index_cache_segments: 8,
        ..small_config()
    };
    {
        let log = Log::open(dir.path(), config.clone()).unwrap();
        for i in 0..3000 {
            log.append(vec![record(i, 100)]).unwrap();
        }
        assert!(log.segment_count() > 100, "{}", log.segment_count());
    }
    let before = open_descriptors();
    let log = Log::open(dir.path(), config.clone()).unwrap();
    let after_open = open_descriptors();
    assert!(
        after_open - before < 10,
        "opening {} segments took {} descriptors",
        log.segment_count(),
        after_open - before
    );
    assert_eq!(read_all(&log).len(), 3000);
    let after_reads = open_descriptors();
    assert!(
        after_reads - before < 10 + config.index_cache_segments,
        "reading every segment left {} descriptors open",
        after_reads - before
    );
}
