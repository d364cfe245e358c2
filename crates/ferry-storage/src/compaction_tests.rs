use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::{LogConfig, ManualClock, NewRecord, StorageError};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 128,
        max_batch_bytes: 4096,
        max_record_bytes: 4096,
        // Few loaded indexes: segments are evicted and reopened while compaction runs.
        index_cache_segments: 2,
        ..LogConfig::default()
    }
}

fn open(dir: &std::path::Path, clock: &ManualClock) -> Log {
    Log::open_with_clock(dir, config(), Arc::new(clock.clone())).expect("open log")
}

fn keyed(key: &str, value: &str) -> NewRecord {
    NewRecord::new(Bytes::copy_from_slice(value.as_bytes())).with_key(key.to_string())
}

fn all(log: &Log) -> Vec<(u64, Option<Bytes>, Bytes)> {
    let mut out = Vec::new();
    let mut next = log.start_offset();
    while next < log.end_offset() {
        let records = log.read(next, 64 * 1024).expect("read");
        let Some(last) = records.last() else { break };
        next = last.offset + 1;
        out.extend(records.into_iter().map(|r| (r.offset, r.key, r.value)));
    }
    out
}

/// Compacts every sealed segment, with a one-day tombstone grace.
fn everything() -> CompactionPolicy {
    CompactionPolicy {
        below: u64::MAX,
        tombstone_retention: Duration::from_millis(DAY_MS as u64),
    }
}

/// Appends `rounds` values for each of `keys` keys, one record per append, and rolls so that
/// everything written is in sealed segments.
fn fill(log: &Log, keys: usize, rounds: usize) {
    for round in 0..rounds {
        for key in 0..keys {
            log.append(vec![keyed(&format!("k{key}"), &format!("v{round}-{key}"))])
                .unwrap();
        }
    }
    log.roll().unwrap();
}

fn latest_values(keys: usize, rounds: usize) -> Vec<(Option<Bytes>, Bytes)> {
    (0..keys)
        .map(|key| {
            (
                Some(Bytes::from(format!("k{key}"))),
                Bytes::from(format!("v{}-{key}", rounds - 1)),
            )
        })
        .collect()
}

#[test]
fn compaction_keeps_only_the_latest_value_of_each_key() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let log = open(dir.path(), &clock);
    fill(&log, 5, 40);
    assert!(log.segment_count() > 3, "the test needs several segments");
    let before = log.size_bytes();
    let report = log.compact(&everything()).unwrap();
    assert_eq!(report.records_removed, 5 * 39);
    assert!(report.segments_deleted > 0, "{report:?}");
    assert!(report.bytes_after < report.bytes_before);
    assert!(log.size_bytes() < before);
    let got = all(&log);
    let values: Vec<_> = got.iter().map(|(_, k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(values, latest_values(5, 40));
    // Offsets are those the records were written at.
    let offsets: Vec<u64> = got.iter().map(|(o, _, _)| *o).collect();
    assert_eq!(offsets, (195..200).collect::<Vec<_>>());
    assert_eq!(report.start_offset, log.start_offset());
}

#[test]
fn reads_at_removed_offsets_return_the_next_kept_record() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let log = open(dir.path(), &clock);
    // Keep a keyless record early on so the first segment survives with gaps inside it.
    log.append(vec![NewRecord::new("keyless")]).unwrap();
    fill(&log, 3, 30);
    log.append(vec![keyed("k0", "after")]).unwrap();
    log.compact(&everything()).unwrap();
    let got = all(&log);
    assert_eq!(got[0], (0, None, Bytes::from("keyless")));
    assert_eq!(got.len(), 4, "{got:?}");
    for from in 1..log.end_offset() {
        let records = log.read(from, 1).unwrap();
        let expected = got.iter().find(|(o, _, _)| *o >= from).unwrap();
        assert_eq!(
            records.first().map(|r| r.offset),
            Some(expected.0),
            "read at {from}"
        );
    }
    // Batch reads step over the gaps too, within and across segments.
    let batches = log.read_batches(1, 64 * 1024).unwrap();
    let offsets: Vec<u64> = batches
        .iter()
        .flat_map(|b| b.records().map(|r| r.offset))
        .collect();
    assert_eq!(offsets, vec![89, 90, 91]);
}

#[test]
fn tombstones_stay_within_their_grace_and_go_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(10 * DAY_MS);
    let log = open(dir.path(), &clock);
    log.append(vec![keyed("gone", "value")]).unwrap();
    log.append(vec![keyed("kept", "value")]).unwrap();
    log.append(vec![keyed("gone", "")]).unwrap();
    log.roll().unwrap();
    log.append(vec![keyed("other", "x")]).unwrap();
    let report = log.compact(&everything()).unwrap();
    assert_eq!(report.records_removed, 1, "only the superseded value goes");
    let got = all(&log);
    assert_eq!(
        got,
        vec![
            (1, Some(Bytes::from("kept")), Bytes::from("value")),
            (2, Some(Bytes::from("gone")), Bytes::new()),
            (3, Some(Bytes::from("other")), Bytes::from("x")),
        ]
    );
    clock.advance(DAY_MS - 1);
    assert_eq!(log.compact(&everything()).unwrap().records_removed, 0);
    clock.advance(2);
    let report = log.compact(&everything()).unwrap();
    assert_eq!((report.records_removed, report.tombstones_removed), (1, 1));
    let keys: Vec<_> = all(&log).into_iter().map(|(o, _, _)| o).collect();
    assert_eq!(keys, vec![1, 3]);
}

#[test]
fn nothing_at_or_above_below_nor_in_the_active_segment_is_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let log = open(dir.path(), &clock);
    fill(&log, 2, 30);
    for i in 0..5 {
        log.append(vec![keyed("k0", &format!("active-{i}"))])
            .unwrap();
    }
    let report = log
        .compact(&CompactionPolicy {
            below: 0,
            ..CompactionPolicy::default()
        })
        .unwrap();
    assert_eq!(
        report,
        CompactionReport {
            start_offset: 0,
            ..Default::default()
        }
    );
    log.compact(&everything()).unwrap();
    let got = all(&log);
    // The active segment keeps all five; sealed segments keep only k1's latest.
    assert_eq!(got.len(), 6, "{got:?}");
    assert_eq!(got[0].1, Some(Bytes::from("k1")));
}

#[test]
fn compacted_log_reopens_with_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let expected = {
        let log = open(dir.path(), &clock);
        log.append(vec![NewRecord::new("keyless")]).unwrap();
        fill(&log, 4, 25);
        log.append(vec![keyed("k1", "tail")]).unwrap();
        log.compact(&everything()).unwrap();
        let expected = all(&log);
        log.close().unwrap();
        expected
    };
    let log = open(dir.path(), &clock);
    assert!(log.recovery_report().rebuilt_indexes.is_empty());
    assert_eq!(all(&log), expected);
    // Appends continue after the old end, never reusing a removed offset.
    let appended = log.append(vec![keyed("k2", "new")]).unwrap();
    assert_eq!(appended.base_offset, 102);
    // Compacting again changes nothing but what the new record superseded.
    log.roll().unwrap();
    let report = log.compact(&everything()).unwrap();
    assert_eq!(report.records_removed, 1);
}

/// Reopens after `mess` has left the directory as a crash at some step would.
fn reopen_after(
    dir: &std::path::Path,
    clock: &ManualClock,
    mess: impl FnOnce(&std::path::Path),
) -> Log {
    mess(dir);
    open(dir, clock)
}

#[test]
fn a_leftover_temporary_file_is_removed_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let expected = {
        let log = open(dir.path(), &clock);
        fill(&log, 3, 20);
        let expected = all(&log);
        log.close().unwrap();
        expected
    };
    let tmp = crate::segment::log_path(dir.path(), 0).with_extension("log.compact.tmp");
    let log = reopen_after(dir.path(), &clock, |_| {
        std::fs::write(&tmp, b"half a compacted segment").unwrap();
    });
    assert!(!tmp.exists());
    assert_eq!(all(&log), expected);
}

#[test]
fn a_crash_between_the_steps_of_a_rewrite_opens_cleanly() {
    // After the old index is removed (old file, no index) and after the rename (new file, no
    // index): both must open, by rebuilding the index, with the records of one file or the
    // other.
    for renamed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(1_000_000);
        let log = open(dir.path(), &clock);
        log.append(vec![NewRecord::new("keyless")]).unwrap();
        fill(&log, 3, 20);
        log.append(vec![keyed("k0", "tail")]).unwrap();
        let before = all(&log);
        let base = log.segments()[0].base_offset;
        let log_path = crate::segment::log_path(dir.path(), base);
        let saved_old = std::fs::read(&log_path).unwrap();
        log.compact(&everything()).unwrap();
        let after = all(&log);
        log.close().unwrap();
        let log = reopen_after(dir.path(), &clock, |dir| {
            std::fs::remove_file(crate::segment::index_path(dir, base)).unwrap();
            if !renamed {
                std::fs::write(&log_path, &saved_old).unwrap();
            }
        });
        assert_eq!(log.recovery_report().rebuilt_indexes.len(), 1);
        let got = all(&log);
        if renamed {
            assert_eq!(got, after);
        } else {
            // The first segment is back whole; later segments were already compacted.
            assert_eq!(got[..3], before[..3]);
            assert_eq!(got.last(), after.last());
        }
        let appended = log.append(vec![keyed("k9", "x")]).unwrap();
        assert_eq!(appended.base_offset, 62);
    }
}

#[test]
fn a_reader_holding_a_segment_reads_its_old_file_after_a_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let log = open(dir.path(), &clock);
    log.append(vec![NewRecord::new("keyless")]).unwrap();
    fill(&log, 3, 20);
    log.append(vec![keyed("k0", "tail")]).unwrap();
    let old = log.segments()[0].clone();
    let old_extent = old.extent();
    // Force the old segment's descriptor closed, as the index cache does.
    old.release_file();
    log.compact(&everything()).unwrap();
    assert!(old.is_retired());
    // The cache evicting it now must not close the file: reopened by path it would be the
    // new one, which its extent does not describe.
    old.release_file();
    let mut position = 0;
    let mut offsets = Vec::new();
    while position < old_extent.len {
        let batch =
            crate::log::read_one_batch(&old, position, old_extent.len, log.config()).unwrap();
        position += batch.header().length as u64;
        offsets.extend(batch.records().map(|r| r.offset));
    }
    assert_eq!(offsets, (0..offsets.len() as u64).collect::<Vec<_>>());
    assert_ne!(log.segments()[0].extent().len, old_extent.len);
}

#[test]
fn a_crash_mid_rewrite_of_the_segment_before_an_empty_active_one_reuses_no_offset() {
    // With the old index removed (and the new file renamed in, or not), the segment before
    // an empty active segment looks like the old active segment of an unfinished roll,
    // unless recovery tells the two apart: taking it for one would drop the empty segment
    // and hand out offsets again from the end of the compacted data.
    for renamed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(1_000_000);
        let log = open(dir.path(), &clock);
        fill(&log, 3, 20);
        log.append(vec![NewRecord::new("keyless")]).unwrap();
        for i in 0..5 {
            log.append(vec![keyed("k0", &format!("again-{i}"))])
                .unwrap();
        }
        // The segment's last record goes: a tombstone past its grace.
        log.append(vec![keyed("k2", "")]).unwrap();
        log.roll().unwrap();
        clock.advance(DAY_MS + 1);
        let end = log.end_offset();
        let last_sealed = log.segments()[log.segment_count() - 2].base_offset;
        let log_path = crate::segment::log_path(dir.path(), last_sealed);
        let saved_old = std::fs::read(&log_path).unwrap();
        let report = log.compact(&everything()).unwrap();
        assert!(report.segments_rewritten > 0, "{report:?}");
        assert_eq!(report.tombstones_removed, 1);
        assert_eq!(log.end_offset(), end);
        log.close().unwrap();
        let active = crate::segment::log_path(dir.path(), end);
        let log = reopen_after(dir.path(), &clock, |dir| {
            std::fs::remove_file(crate::segment::index_path(dir, last_sealed)).unwrap();
            if !renamed {
                std::fs::write(&log_path, &saved_old).unwrap();
            }
            // Empty, as when preallocation had not yet run (or is off).
            std::fs::File::options()
                .write(true)
                .open(&active)
                .unwrap()
                .set_len(0)
                .unwrap();
        });
        assert_eq!(log.end_offset(), end, "renamed: {renamed}");
        assert_eq!(log.append(vec![keyed("k1", "x")]).unwrap().base_offset, end);
    }
}

#[test]
fn readers_racing_with_compaction_never_see_a_torn_or_wrong_record() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let log = Arc::new(open(dir.path(), &clock));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (log, stop) = (log.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut next = log.start_offset();
                    while next < log.end_offset() {
                        let records = match log.read(next, 2048) {
                            Ok(records) => records,
                            // Compaction deleted the first segment under the read.
                            Err(StorageError::OffsetOutOfRange { start, .. }) if start > next => {
                                break;
                            }
                            Err(e) => panic!("read at {next}: {e}"),
                        };
                        let Some(last) = records.last() else { break };
                        for r in &records {
                            assert!(r.offset >= next);
                            // Every value names the offset it was written at.
                            assert_eq!(r.value, r.offset.to_string(), "at {}", r.offset);
                        }
                        next = last.offset + 1;
                        reads += 1;
                    }
                }
                reads
            })
        })
        .collect();
    for round in 0..30u64 {
        for k in 0..10u64 {
            let offset = round * 10 + k;
            log.append(vec![keyed(&format!("k{k}"), &offset.to_string())])
                .unwrap();
        }
        if round % 3 == 2 {
            log.roll().unwrap();
            log.compact(&everything()).unwrap();
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for reader in readers {
        assert!(reader.join().unwrap() > 0);
    }
    let kept = all(&log);
    assert_eq!(kept.len(), 10, "{kept:?}");
}
