//! Opening a log directory whose files hold arbitrary bytes (see `src/lib.rs` for how an
//! input becomes segment logs, indexes, a checkpoint and leftovers). Recovery must either
//! refuse with a typed error or hand back a consistent log:
//! - its offsets are ordered (`start <= end`) and reads return records in order, inside
//!   them, or a typed error;
//! - it takes an append at exactly its end offset;
//! - closed and opened again, it opens without repairs, at the same end, with the same
//!   records.
//!
//! Run (from crates/ferry-storage; nightly):
//!     cargo fuzz run recovery_scan -- -max_total_time=600 -timeout=10
//! Seeds in corpus/recovery_scan/ are real log directories (examples/gen_recovery_seeds.rs).

#![no_main]

use std::sync::Arc;
use std::time::Duration;

use ferry_storage::{Durability, Log, LogConfig, ManualClock, NewRecord, Record};
use ferry_storage_fuzz::DirImage;
use libfuzzer_sys::fuzz_target;

/// Small limits, so a few kilobytes of input make several segments and index entries.
fn config(repair: bool) -> LogConfig {
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

fn open(dir: &std::path::Path, repair: bool) -> ferry_storage::Result<Log> {
    Log::open_with_clock(dir, config(repair), Arc::new(ManualClock::new(1_000)))
}

/// Every record from the start, or `None` if a read fails (a typed error: damage that
/// recovery does not scan for, such as records inside a sealed segment it trusts by its
/// footer, is found by the read that meets it).
fn read_all(log: &Log) -> Option<Vec<Record>> {
    let (start, end) = (log.start_offset(), log.end_offset());
    let mut next = start;
    let mut out: Vec<Record> = Vec::new();
    while next < end {
        let records = log.read(next, 16 * 1024).ok()?;
        let Some(last) = records.last() else {
            // Offsets past the data but vouched for by a checkpoint stay retired: a gap
            // at the end reads as nothing.
            break;
        };
        for r in &records {
            assert!(
                r.offset >= next && r.offset < end,
                "{} outside {next}..{end}",
                r.offset
            );
            if let Some(prev) = out.last() {
                assert!(
                    r.offset > prev.offset,
                    "offsets go back: {} after {}",
                    r.offset,
                    prev.offset
                );
            }
            out.push(r.clone());
        }
        next = last.offset + 1;
    }
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let image = DirImage::parse(data);
    let tmp = tempfile::Builder::new()
        .prefix("ferry-recovery-fuzz")
        .tempdir_in(scratch())
        .expect("a temporary directory");
    let dir = tmp.path().join("log");
    std::fs::create_dir(&dir).expect("the log directory");
    image.write_to(&dir).expect("the image's files");

    let Ok(log) = open(&dir, image.repair) else {
        return;
    };
    let (start, end) = (log.start_offset(), log.end_offset());
    assert!(start <= end, "start {start} after end {end}");
    let before = read_all(&log);

    let appended = log.append(vec![NewRecord::new("probe").with_timestamp(5)]);
    let appended = match appended {
        Ok(a) => {
            assert_eq!(a.base_offset, end, "an append lands at the end");
            Some(a)
        }
        // No more offsets to hand out is a refusal, not damage.
        Err(e) => {
            assert!(
                end > u64::MAX - 2,
                "a recovered log refused an append at {end}: {e}"
            );
            None
        }
    };
    log.close().expect("a recovered log closes");

    let again = open(&dir, false).unwrap_or_else(|e| panic!("a recovered log reopens: {e}"));
    let report = again.recovery_report();
    assert!(
        report.repaired.is_empty(),
        "a second open repaired: {report:?}"
    );
    assert!(
        report.truncated.is_none(),
        "a second open truncated: {report:?}"
    );
    let expected_end = if appended.is_some() { end + 1 } else { end };
    assert_eq!(again.end_offset(), expected_end);
    assert_eq!(again.start_offset(), start);
    if let (Some(before), Some(after)) = (before, read_all(&again)) {
        let probe = usize::from(appended.is_some());
        assert_eq!(after.len(), before.len() + probe);
        assert_eq!(after[..before.len()], before[..]);
        if appended.is_some() {
            let last = after.last().expect("the probe");
            assert_eq!((last.offset, &last.value[..]), (end, &b"probe"[..]));
        }
    }
});

/// A RAM-backed directory when there is one: recovery fsyncs a lot, and on tmpfs that is
/// free.
fn scratch() -> std::path::PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}
