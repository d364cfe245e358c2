//! A full disk and a read-only directory: typed errors, a log that stays readable and
//! consistent, and appends that succeed again once space is back.
//!
//! These tests mount a small tmpfs, which needs root (CI and the development machines run as
//! root). Elsewhere they skip with a loud message; under `CI=true` that is a failure.

mod common;

use std::path::Path;

use common::*;
use ferry_storage::{Log, StorageError};
use ferry_testkit::SmallFs;

/// The tests of this file run one at a time: a `mount` forked by one test holds a copy of
/// every descriptor of the process until it execs, including the other test's directory lock,
/// which would then seem held by a live process for a moment.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn fill(path: &Path) -> usize {
    use std::io::Write;
    let mut file = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 4096];
    let mut written = 0;
    while file.write_all(&chunk).is_ok() {
        written += chunk.len();
    }
    written
}

#[test]
fn full_disk_fails_appends_with_disk_full_and_recovers_when_space_returns() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(fs) = SmallFs::mount("1m") else {
        return;
    };
    let log_dir = fs.path.join("log");
    let config = small_config();
    let log = Log::open(&log_dir, config.clone()).unwrap();
    let mut acked = 0u64;
    for i in 0..20 {
        log.append(vec![record(i, 200)]).unwrap();
        acked += 1;
    }
    fill(&fs.path.join("filler"));
    let error = loop {
        match log.append(vec![record(acked, 200)]) {
            Ok(_) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 100_000, "the disk never filled");
    };
    assert!(matches!(error, StorageError::DiskFull { .. }), "{error:?}");
    assert!(error.is_resource_exhausted());
    // Nothing acknowledged is lost and the log is still readable while full.
    assert_eq!(log.end_offset(), acked);
    assert_eq!(read_all(&log).len() as u64, acked);
    // Further appends keep failing cleanly, without growing or corrupting the log.
    for _ in 0..3 {
        assert!(matches!(
            log.append(vec![record(0, 200)]),
            Err(StorageError::DiskFull { .. })
        ));
    }
    assert_eq!(log.end_offset(), acked);

    std::fs::remove_file(fs.path.join("filler")).unwrap();
    for i in 0..50 {
        let appended = log.append(vec![record(acked + i, 200)]).unwrap();
        assert_eq!(appended.base_offset, acked + i);
    }
    drop(log);
    let log = Log::open(&log_dir, config).unwrap();
    let records = read_all(&log);
    assert_eq!(records.len() as u64, acked + 50);
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.value, record(i as u64, 200).value);
    }
}

#[test]
fn read_only_directory_is_a_typed_error_and_changes_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(fs) = SmallFs::mount("4m") else {
        return;
    };
    let log_dir = fs.path.join("log");
    let config = small_config();
    {
        let log = Log::open(&log_dir, config.clone()).unwrap();
        for i in 0..30 {
            log.append(vec![record(i, 100)]).unwrap();
        }
        log.close().unwrap();
    }
    fs.remount("ro");
    match Log::open(&log_dir, config.clone()) {
        Err(StorageError::ReadOnly { path }) => assert!(path.starts_with(&fs.path)),
        other => panic!("expected ReadOnly, got {other:?}"),
    }
    match Log::open(fs.path.join("new-log"), config.clone()) {
        Err(StorageError::ReadOnly { .. }) => {}
        other => panic!("expected ReadOnly for a new log, got {other:?}"),
    }
    fs.remount("rw");
    let log = Log::open(&log_dir, config).unwrap();
    assert_eq!(read_all(&log).len(), 30);
}
