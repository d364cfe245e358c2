//! Opening a log: find its segments, check what a crash may have left behind, and hand the
//! writer a consistent active segment.
//!
//! Each crash window is written beside the code that handles it: a torn tail and
//! preallocated zeros in `active.rs` (with `torn.rs`, which tells a torn write from damage),
//! damage in the middle in `repair.rs`, a missing or damaged index in `rebuild.rs`, and here
//! the windows met while listing the segments:
//!
//! - **Crash during a roll**: data is synced, then the next segment is created, then the old
//!   one gets its footer. A crash before the footer leaves a sealed segment without one
//!   (verified and re-indexed by a scan) followed by an empty segment; if the roll failed and
//!   its empty segment came back after a power loss, that segment is dropped here, so its
//!   base offset is never used twice.
//! - **Crash during retention**: the log file is unlinked before its index, so an orphaned
//!   index is deleted here; a segment whose index vanished is simply rebuilt.
//! - **Crash during compaction** (see `compaction.rs`): a `*.compact.tmp` file is deleted
//!   here with the other temporary files; the old index is removed before the new file is
//!   renamed over the old one, so a segment is never opened with an index describing the
//!   other file, and a missing index is rebuilt by a scan, which allows offset gaps.

mod active;
mod rebuild;
mod repair;
mod sealed;
mod torn;

use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::clock::Clock;
use crate::config::LogConfig;
use crate::error::{IoContext, Result, StorageError};
use crate::fs_util;
use crate::index;
use crate::segment::{self, ScanOutcome, Segment};
use crate::writer::ActiveState;

pub(crate) use rebuild::{load_or_rebuild_index, write_sealed_index};

pub const QUARANTINE_DIR: &str = "quarantine";

/// What recovery found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub segments: usize,
    /// Bytes of the active segment verified by the tail scan.
    pub scanned_bytes: u64,
    /// A torn tail that was cut off: the file and the byte range removed.
    pub truncated: Option<(PathBuf, Range<u64>)>,
    /// Indexes that were missing or damaged and were rebuilt from the log.
    pub rebuilt_indexes: Vec<PathBuf>,
    /// Segments repaired on request, with where the damaged copy went and the offsets lost.
    pub repaired: Vec<RepairedSegment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairedSegment {
    pub file: PathBuf,
    pub quarantined_to: PathBuf,
    pub lost: Vec<Range<u64>>,
}

pub(crate) struct Recovered {
    pub segments: Vec<Arc<Segment>>,
    pub active_state: ActiveState,
    pub report: RecoveryReport,
}

pub(crate) fn recover(dir: &Path, config: &LogConfig, clock: &dyn Clock) -> Result<Recovered> {
    let mut report = RecoveryReport::default();
    let mut bases = list_segments(dir)?;
    if bases.is_empty() {
        fs::File::create(segment::log_path(dir, 0)).ctx("create segment", dir)?;
        fs_util::sync_dir(dir)?;
        bases.push(0);
    }
    drop_unfinished_roll(dir, &mut bases)?;
    let mut segments = Vec::with_capacity(bases.len());
    let last = bases.len() - 1;
    for (i, &base) in bases[..last].iter().enumerate() {
        let next_base = bases[i + 1];
        segments.push(Arc::new(sealed::open(
            dir,
            base,
            next_base,
            config,
            clock,
            &mut report,
        )?));
    }
    let (active, active_state) = active::open(dir, bases[last], config, clock, &mut report)?;
    segments.push(active);
    let mut earlier = i64::MIN;
    for segment in &segments {
        // Sealed segments scanned above are closed again until a read needs them.
        segment.release_file();
        segment
            .earlier_max_timestamp
            .store(earlier, std::sync::atomic::Ordering::Release);
        earlier = earlier.max(segment.extent().max_timestamp);
    }
    report.segments = segments.len();
    Ok(Recovered {
        segments,
        active_state,
        report,
    })
}

/// A roll creates the next segment before it writes the previous one's footer. An empty last
/// segment after one without a valid footer is therefore a roll that never finished (or one
/// that failed and was undone, then brought back by a power loss): the previous segment is
/// still the active one, and may hold acknowledged records past the empty one's base.
fn drop_unfinished_roll(dir: &Path, bases: &mut Vec<u64>) -> Result<()> {
    while let [.., previous, last] = bases[..] {
        let last_path = segment::log_path(dir, last);
        let previous_index = segment::index_path(dir, previous);
        // An active segment always has an index file (the writer creates it with the
        // segment), so a previous segment with none is a sealed one caught by a crash in
        // compaction's rewrite, which removes the index before it renames the new file in.
        let sealed = !previous_index.exists()
            || index::read_footer(&previous_index)?.is_some_and(|f| {
                f.segment_len == file_len(&segment::log_path(dir, previous)).unwrap_or(0)
            });
        if file_len(&last_path)? != 0 || sealed {
            return Ok(());
        }
        fs::remove_file(&last_path).ctx("remove unfinished segment", &last_path)?;
        let index = segment::index_path(dir, last);
        if let Err(e) = fs::remove_file(&index)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(StorageError::io(
                "remove unfinished segment index",
                &index,
                e,
            ));
        }
        fs_util::sync_dir(dir)?;
        tracing::warn!(segment = %last_path.display(), "removed the empty segment of an unfinished roll");
        bases.pop();
    }
    Ok(())
}

/// Base offsets of the segments in `dir`, ascending; removes leftovers of interrupted work.
fn list_segments(dir: &Path) -> Result<Vec<u64>> {
    let mut logs = Vec::new();
    let mut indexes = Vec::new();
    for entry in fs::read_dir(dir).ctx("list", dir)? {
        let path = entry.ctx("list", dir)?.path();
        let (Some(stem), Some(ext)) = (
            path.file_stem().and_then(|s| s.to_str()),
            path.extension().and_then(|s| s.to_str()),
        ) else {
            continue;
        };
        if ext == "tmp" {
            fs::remove_file(&path).ctx("remove leftover", &path)?;
            continue;
        }
        let Ok(base) = stem.parse::<u64>() else {
            continue;
        };
        match ext {
            segment::LOG_SUFFIX => logs.push(base),
            segment::INDEX_SUFFIX => indexes.push(base),
            _ => {}
        }
    }
    logs.sort_unstable();
    for base in indexes {
        if logs.binary_search(&base).is_err() {
            let path = segment::index_path(dir, base);
            fs::remove_file(&path).ctx("remove orphaned index", &path)?;
        }
    }
    Ok(logs)
}

pub(super) fn file_len(path: &Path) -> Result<u64> {
    Ok(fs::metadata(path).ctx("stat", path)?.len())
}

pub(super) fn expected_after(outcome: &ScanOutcome, base: u64) -> u64 {
    outcome
        .batches
        .last()
        .map_or(base, |(_, h)| h.next_offset())
}

pub(super) fn corrupt_log(
    dir: &Path,
    file: &Path,
    stop: &segment::ScanStop,
    lost: Range<u64>,
) -> StorageError {
    StorageError::CorruptLog {
        dir: dir.to_path_buf(),
        file: file.to_path_buf(),
        position: stop.position,
        detail: stop.error.to_string(),
        lost,
    }
}

/// True when `[from, to)` of the segment holds only zero bytes.
pub(super) fn all_zero(segment: &Segment, from: u64, to: u64) -> Result<bool> {
    const CHUNK: u64 = 1 << 20;
    let mut pos = from;
    while pos < to {
        let n = (to - pos).min(CHUNK) as usize;
        if segment.read_at(pos, n)?.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        pos += n as u64;
    }
    Ok(true)
}
