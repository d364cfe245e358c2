//! Behaviour of the log through its public API.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use ferry_storage::{
    Durability, Log, LogConfig, ManualClock, NewRecord, RetentionPolicy, StorageError,
};

#[test]
fn appended_records_read_back_identical_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config();
    let mut expected = Vec::new();
    {
        let log = open(dir.path(), &config);
        for i in 0..200 {
            let appended = log.append(vec![record(i, 40)]).unwrap();
            assert_eq!(appended.base_offset, i);
            expected.push(record(i, 40));
        }
        assert!(log.segment_count() > 1, "small segments must have rolled");
        log.close().unwrap();
    }
    let log = open(dir.path(), &config);
    assert_eq!(log.recovery_report().truncated, None);
    // A clean close checkpoints the end: recovery re-reads at most the last index interval.
    let scanned = log.recovery_report().scanned_bytes;
    assert!(
        scanned <= 256 + 200,
        "scanned {scanned} bytes after a clean close"
    );
    let records = read_all(&log);
    assert_eq!(records.len(), 200);
    for (i, (got, want)) in records.iter().zip(&expected).enumerate() {
        assert_eq!(got.offset, i as u64);
        assert_eq!(Some(got.value.clone()), Some(want.value.clone()));
        assert_eq!(got.key, want.key);
        assert_eq!(got.headers, want.headers);
        assert_eq!(Some(got.timestamp), want.timestamp);
    }
    // Appends continue after the recovered end.
    assert_eq!(log.append(vec![record(200, 10)]).unwrap().base_offset, 200);
}

#[test]
fn read_from_any_offset_starts_at_that_offset() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &small_config());
    for i in 0..50 {
        log.append(vec![
            record(3 * i, 30),
            record(3 * i + 1, 30),
            record(3 * i + 2, 30),
        ])
        .unwrap();
    }
    for from in 0..150 {
        let got = log.read(from, 1).unwrap();
        assert_eq!(got.first().unwrap().offset, from);
    }
    assert!(log.read(150, 1024).unwrap().is_empty());
    assert!(matches!(
        log.read(151, 1024),
        Err(StorageError::OffsetOutOfRange { requested: 151, .. })
    ));
}

#[test]
fn offset_for_timestamp_finds_first_record_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &small_config());
    for i in 0..300u64 {
        log.append(vec![
            NewRecord::new(vec![0u8; 50]).with_timestamp(10 * i as i64),
        ])
        .unwrap();
    }
    assert_eq!(log.offset_for_timestamp(-5).unwrap(), Some(0));
    assert_eq!(log.offset_for_timestamp(0).unwrap(), Some(0));
    assert_eq!(log.offset_for_timestamp(1).unwrap(), Some(1));
    assert_eq!(log.offset_for_timestamp(1234).unwrap(), Some(124));
    assert_eq!(log.offset_for_timestamp(2990).unwrap(), Some(299));
    assert_eq!(log.offset_for_timestamp(2991).unwrap(), None);
}

#[test]
fn oversized_record_and_empty_append_are_typed_errors_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &small_config());
    log.append(vec![record(0, 10)]).unwrap();
    let big = NewRecord::new(vec![0u8; 5000]);
    assert!(matches!(
        log.append(vec![big]),
        Err(StorageError::TooLarge { what: "record", .. })
    ));
    let many: Vec<_> = (0..100).map(|i| record(i, 100)).collect();
    assert!(matches!(
        log.append(many),
        Err(StorageError::TooLarge { what: "batch", .. })
    ));
    assert!(matches!(log.append(vec![]), Err(StorageError::EmptyAppend)));
    assert_eq!(log.end_offset(), 1);
    assert_eq!(log.append(vec![record(1, 10)]).unwrap().base_offset, 1);
}

#[test]
fn second_open_of_a_log_directory_reports_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let _log = open(dir.path(), &small_config());
    match Log::open(dir.path(), small_config()) {
        Err(StorageError::Locked { pid, .. }) => assert_eq!(pid, std::process::id()),
        other => panic!("expected Locked, got {other:?}"),
    }
}

#[test]
fn concurrent_appenders_get_unique_contiguous_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(open(dir.path(), &small_config()));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                (0..100)
                    .map(|i| {
                        log.append(vec![record(t * 1000 + i, 20)])
                            .unwrap()
                            .base_offset
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut offsets: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    offsets.sort_unstable();
    assert_eq!(offsets, (0..800).collect::<Vec<_>>());
    assert_eq!(read_all(&log).len(), 800);
}

#[test]
fn segments_roll_by_age_with_the_injected_clock() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000);
    let config = LogConfig {
        segment_max_age: Some(Duration::from_secs(60)),
        ..small_config()
    };
    let log = Log::open_with_clock(dir.path(), config, Arc::new(clock.clone())).unwrap();
    log.append(vec![NewRecord::new("a")]).unwrap();
    log.append(vec![NewRecord::new("b")]).unwrap();
    assert_eq!(log.segment_count(), 1);
    clock.advance(60_000);
    log.append(vec![NewRecord::new("c")]).unwrap();
    assert_eq!(log.segment_count(), 2);
}

/// A log in `dir` with 400 records of 60 bytes, one a second from time 0 (each stamped
/// with its append time), on a clock left at the last append.
fn four_hundred_seconds(dir: &std::path::Path) -> Log {
    let clock = ManualClock::new(0);
    let log = Log::open_with_clock(dir, small_config(), Arc::new(clock.clone())).unwrap();
    for i in 0..400 {
        clock.set(i as i64 * 1000);
        log.append(vec![
            NewRecord::new(vec![1u8; 60]).with_timestamp(i as i64 * 1000),
        ])
        .unwrap();
    }
    log
}

#[test]
fn retention_deletes_whole_segments_by_size_age_and_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let log = four_hundred_seconds(dir.path());
    let segments = log.segment_count();
    assert!(segments > 5);

    // keep_from overrides every trigger: nothing from offset 50 on may go.
    let held = log
        .apply_retention(&RetentionPolicy {
            low_watermark: Some(100),
            max_bytes: Some(1),
            keep_from: Some(50),
            ..Default::default()
        })
        .unwrap();
    assert!(log.start_offset() <= 50, "{held:?}");
    assert_eq!(log.read(50, 1).unwrap()[0].offset, 50);

    let by_watermark = log
        .apply_retention(&RetentionPolicy {
            low_watermark: Some(100),
            ..Default::default()
        })
        .unwrap();
    assert!(by_watermark.deleted_segments > 0);
    assert!(
        log.start_offset() <= 100,
        "data above the watermark must stay"
    );
    let start = log.start_offset();
    assert_eq!(log.read(start, 100).unwrap()[0].offset, start);
    assert!(matches!(
        log.read(0, 100),
        Err(StorageError::OffsetOutOfRange { .. })
    ));

    let by_age = log
        .apply_retention(&RetentionPolicy {
            max_age: Some(Duration::from_secs(150)),
            ..Default::default()
        })
        .unwrap();
    assert!(by_age.deleted_segments > 0);
    let first = log.read(log.start_offset(), 1).unwrap()[0].timestamp;
    assert!(
        first <= 399_000 - 150_000 + 1000 * 100,
        "kept segments hold young records"
    );

    let by_size = log
        .apply_retention(&RetentionPolicy {
            max_bytes: Some(10 * 1024),
            ..Default::default()
        })
        .unwrap();
    assert!(by_size.deleted_segments > 0);
    assert!(log.size_bytes() <= 10 * 1024);
    assert_eq!(log.end_offset(), 400);
    drop(log);
    let log = open(dir.path(), &small_config());
    assert_eq!(log.start_offset(), by_size.start_offset);
    assert_eq!(read_all(&log).last().unwrap().offset, 399);
}

#[test]
fn the_start_after_retention_is_predicted_without_deleting() {
    let dir = tempfile::tempdir().unwrap();
    let log = four_hundred_seconds(dir.path());
    let everything = RetentionPolicy {
        max_bytes: Some(1),
        ..Default::default()
    };
    let all_but_active = log.start_offset_after_retention(&everything);
    assert!(all_but_active > 0 && all_but_active < 400);
    for policy in [
        RetentionPolicy {
            max_age: Some(Duration::from_secs(300)),
            ..Default::default()
        },
        RetentionPolicy {
            max_bytes: Some(20 * 1024),
            ..Default::default()
        },
        everything,
    ] {
        let (start, segments) = (log.start_offset(), log.segment_count());
        let predicted = log.start_offset_after_retention(&policy);
        assert!(
            predicted > start,
            "each policy here deletes more than the last: {policy:?}"
        );
        assert_eq!(
            (log.start_offset(), log.segment_count()),
            (start, segments),
            "a prediction deletes nothing"
        );
        // Held at the prediction, the policy deletes exactly up to it.
        let report = log
            .apply_retention(&RetentionPolicy {
                keep_from: Some(predicted),
                ..policy.clone()
            })
            .unwrap();
        assert_eq!(
            (report.start_offset, log.start_offset()),
            (predicted, predicted)
        );
    }
    assert_eq!(log.start_offset(), all_but_active);
    assert_eq!(
        log.start_offset_after_retention(&RetentionPolicy::default()),
        all_but_active
    );
}

#[test]
fn every_durability_mode_acknowledges_and_persists() {
    for durability in [
        Durability::Fsync,
        Durability::Interval(Duration::from_millis(5)),
        Durability::None,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            durability,
            ..small_config()
        };
        let log = open(dir.path(), &config);
        for i in 0..50 {
            log.append(vec![record(i, 100)]).unwrap();
        }
        log.close().unwrap();
        let log = open(dir.path(), &config);
        assert_eq!(read_all(&log).len(), 50, "{durability:?}");
    }
}

#[test]
fn append_then_completes_on_the_writer_thread() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &small_config());
    let (tx, rx) = std::sync::mpsc::channel();
    for i in 0..10 {
        let tx = tx.clone();
        log.append_then(
            vec![NewRecord::new(Bytes::from(vec![i as u8; 8]))],
            Box::new(move |r| tx.send(r.unwrap().base_offset).unwrap()),
        );
    }
    let mut got: Vec<u64> = (0..10).map(|_| rx.recv().unwrap()).collect();
    got.sort_unstable();
    assert_eq!(got, (0..10).collect::<Vec<_>>());
}

#[test]
fn offset_for_timestamp_matches_a_linear_search_with_unordered_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    // Producers stamp records themselves: timestamps go back and forth across segments.
    let timestamps: Vec<i64> = (0..600i64)
        .map(|i| (i * 7919) % 1000 + (i / 100) * 300)
        .collect();
    let brute = |t: i64| timestamps.iter().position(|&ts| ts >= t).map(|i| i as u64);
    {
        let log = open(dir.path(), &small_config());
        for &ts in &timestamps {
            log.append(vec![NewRecord::new(vec![0u8; 40]).with_timestamp(ts)])
                .unwrap();
        }
        assert!(log.segment_count() > 3);
        for t in (-10..2600).step_by(7) {
            assert_eq!(log.offset_for_timestamp(t).unwrap(), brute(t), "t = {t}");
        }
    }
    let log = open(dir.path(), &small_config());
    for t in (-10..2600).step_by(13) {
        assert_eq!(
            log.offset_for_timestamp(t).unwrap(),
            brute(t),
            "after reopen, t = {t}"
        );
    }
}
