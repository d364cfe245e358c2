//! The zero-filled space kept ahead of the active segment under `Fsync`: it must never look
//! like data, never look like damage, and never outlive a clean close or a sealed segment.

mod common;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use ferry_storage::{Durability, Log, LogConfig};

fn config() -> LogConfig {
    LogConfig {
        durability: Durability::Fsync,
        preallocate_bytes: 64 * 1024,
        segment_bytes: 256 * 1024,
        ..small_config()
    }
}

fn active_segment(dir: &Path) -> std::path::PathBuf {
    let mut logs: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.pop().unwrap()
}

/// Copies the log directory while the log is open: the image a crash would leave.
fn crash_image(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && path.file_name().unwrap() != "LOCK" {
            fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

fn wait_for_zero_tail(path: &Path, data_len: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let len = fs::metadata(path).unwrap().len();
        if len > data_len {
            return len;
        }
        assert!(
            Instant::now() < deadline,
            "the preallocator never extended {path:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn preallocated_zero_tail_is_a_clean_end_not_a_torn_write() {
    let dir = tempfile::tempdir().unwrap();
    let image = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    for i in 0..100 {
        log.append(vec![record(i, 50)]).unwrap();
    }
    let data_len = log.size_bytes();
    let file_len = wait_for_zero_tail(&active_segment(dir.path()), data_len);
    crash_image(dir.path(), image.path());
    let tail = fs::read(active_segment(image.path())).unwrap();
    assert!(tail[data_len as usize..].iter().all(|&b| b == 0));
    assert!(file_len > data_len);

    let recovered = Log::open(image.path(), config()).unwrap();
    let report = recovered.recovery_report();
    assert_eq!(report.truncated, None, "zeros are not a torn write");
    assert!(report.repaired.is_empty());
    assert_eq!(recovered.end_offset(), 100);
    assert_eq!(read_all(&recovered).len(), 100);
    assert_eq!(
        recovered.append(vec![record(100, 50)]).unwrap().base_offset,
        100
    );
    drop(recovered);
    let reopened = Log::open(image.path(), config()).unwrap();
    assert_eq!(read_all(&reopened).len(), 101);
}

#[test]
fn torn_write_into_preallocated_space_is_truncated_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let image = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    for i in 0..40 {
        log.append(vec![record(i, 80)]).unwrap();
    }
    let data_len = log.size_bytes();
    let file_len = wait_for_zero_tail(&active_segment(dir.path()), data_len);
    crash_image(dir.path(), image.path());
    // The first part of a batch that never finished: its header without its body.
    let segment = active_segment(image.path());
    let mut bytes = fs::read(&segment).unwrap();
    let whole = fs::read(active_segment(dir.path())).unwrap();
    let first_batch_len = u32::from_le_bytes(whole[0..4].try_into().unwrap()) as usize;
    bytes[data_len as usize..data_len as usize + first_batch_len / 2]
        .copy_from_slice(&whole[..first_batch_len / 2]);
    fs::write(&segment, &bytes).unwrap();

    let recovered = Log::open(image.path(), config()).unwrap();
    let (file, range) = recovered
        .recovery_report()
        .truncated
        .clone()
        .expect("torn write reported");
    assert_eq!(file, segment);
    assert_eq!(range, data_len..file_len);
    assert_eq!(read_all(&recovered).len(), 40);
}

#[test]
fn clean_close_and_segment_roll_leave_no_zero_tail() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    for i in 0..3000 {
        log.append(vec![record(i, 100)]).unwrap();
    }
    assert!(log.segment_count() > 2);
    log.close().unwrap();
    let mut logs: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    for path in &logs {
        let bytes = fs::read(path).unwrap();
        let mut pos = 0;
        while pos < bytes.len() {
            let header = ferry_storage::batch::verify(&bytes[pos..], usize::MAX)
                .unwrap_or_else(|e| panic!("{path:?} at {pos}: {e}"));
            pos += header.length as usize;
        }
    }
    let log = Log::open(dir.path(), config()).unwrap();
    assert!(log.recovery_report().rebuilt_indexes.is_empty());
    assert_eq!(read_all(&log).len(), 3000);
}

/// An idle log takes no zeros, and a log written now and then takes a few hundred KiB, not
/// twice the configured `preallocate_bytes`: a broker opens a log per queue, per
/// subscription and per partition, most of them quiet.
#[test]
fn idle_and_quiet_logs_take_little_zeroed_room() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        durability: Durability::Fsync,
        preallocate_bytes: 8 << 20,
        segment_bytes: 64 << 20,
        ..small_config()
    };
    let log = Log::open(dir.path(), config).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let segment = active_segment(dir.path());
    assert_eq!(
        fs::metadata(&segment).unwrap().len(),
        0,
        "zeros before any write"
    );

    log.append(vec![record(0, 100)]).unwrap();
    let data_len = log.size_bytes();
    let file_len = wait_for_zero_tail(&segment, data_len);
    std::thread::sleep(Duration::from_millis(200));
    let file_len = file_len.max(fs::metadata(&segment).unwrap().len());
    assert!(
        file_len - data_len <= 512 * 1024,
        "{} bytes of zeros ahead of one small record",
        file_len - data_len
    );
}
