//! Helpers shared by the storage integration tests.
#![allow(dead_code)]

pub mod rng;

use std::path::Path;

use ferry_storage::{Durability, Log, LogConfig, NewRecord};

pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 8 * 1024,
        index_interval_bytes: 256,
        max_batch_bytes: 4096,
        max_record_bytes: 4096,
        ..LogConfig::default()
    }
}

pub fn open(dir: &Path, config: &LogConfig) -> Log {
    Log::open(dir, config.clone()).expect("open log")
}

pub fn record(i: u64, size: usize) -> NewRecord {
    let mut value = format!("value-{i}-").into_bytes();
    value.resize(size.max(value.len()), (i % 251) as u8);
    NewRecord::new(value)
        .with_key(format!("key-{}", i % 7))
        .with_header("seq", i.to_string())
        .with_timestamp(1_000_000 + i as i64)
}

pub fn read_all(log: &Log) -> Vec<ferry_storage::Record> {
    let mut out = Vec::new();
    let mut next = log.start_offset();
    while next < log.end_offset() {
        let batch = log.read(next, 64 * 1024).expect("read");
        assert!(
            !batch.is_empty(),
            "read at {next} returned nothing before the end"
        );
        next = batch.last().unwrap().offset + 1;
        out.extend(batch);
    }
    out
}

pub fn fsync_config() -> LogConfig {
    LogConfig {
        durability: Durability::Fsync,
        ..small_config()
    }
}

/// `got` holds what `want` wrote: its value, key and headers (the timestamp is the
/// caller's to check, as what a record without one gets differs by test).
pub fn assert_same_content(got: &ferry_storage::Record, want: &NewRecord, label: &str) {
    assert_eq!(
        got.value, want.value,
        "{label}: value at offset {}",
        got.offset
    );
    assert_eq!(got.key, want.key, "{label}: key at offset {}", got.offset);
    assert_eq!(
        got.headers, want.headers,
        "{label}: headers at offset {}",
        got.offset
    );
}
