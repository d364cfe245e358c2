//! Opening a log: find its segments, check what a crash may have left behind, and hand the
//! writer a consistent active segment.
//!
//! Crash windows and how each is handled:
//! - **Torn tail** (crash mid-write, or power loss before fdatasync): the active segment ends
//!   in a partial or unchecksummed batch after the checkpoint. It is truncated, and the byte
//!   range is logged and counted. Under `Fsync` at most one group is written and not yet
//!   synced at any moment, so a torn write spans at most one group; within that span a hole
//!   followed by intact batches (pages persisted out of order into preallocated blocks) is
//!   still a torn write. The checkpoint lags the last sync by up to `checkpoint_interval`,
//!   so acknowledged batches can lie past it: damage to the last of them is indistinguishable
//!   from a torn write and is reported as a truncation.
//! - **Preallocated zeros** after the data end the log cleanly and are cut without a report.
//! - **Damage in the middle** (bit rot, a bad sector, a truncated sealed segment): a bad batch
//!   below the checkpoint, or one followed by intact batches beyond one group, means
//!   acknowledged data is gone. The log refuses to open unless repair is asked for; repair
//!   copies the segment to `quarantine/`, keeps every batch that still verifies and reports
//!   the lost offsets. Lost data is reported, never silently dropped.
//! - **Crash during a roll**: data is synced, then the next segment is created, then the old
//!   one gets its footer. A crash before the footer leaves a sealed segment without one
//!   (verified and re-indexed by a scan) followed by an empty segment; if the roll failed and
//!   its empty segment came back after a power loss, that segment is dropped here, so its
//!   base offset is never used twice.
//! - **Missing or damaged index**: rebuilt from the log; the log is the source of truth.
//! - **Crash during retention**: the log file is unlinked before its index, so an orphaned
//!   index is deleted here; a segment whose index vanished is simply rebuilt.
//! - **Crash during compaction** (see `compaction.rs`): a `*.compact.tmp` file is deleted
//!   here with the other temporary files; the old index is removed before the new file is
//!   renamed over the old one, so a segment is never opened with an index describing the
//!   other file, and a missing index is rebuilt by a scan, which allows offset gaps.

use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::BatchHeader;
use crate::checkpoint::Checkpoint;
use crate::clock::Clock;
use crate::config::LogConfig;
use crate::error::{IoContext, Result, StorageError};
use crate::fs_util;
use crate::index::{self, Footer, IndexBuilder, IndexEntry};
use crate::segment::{self, Extent, ScanOutcome, Segment};
use crate::writer::ActiveState;

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
        segments.push(Arc::new(open_sealed(
            dir,
            base,
            next_base,
            config,
            clock,
            &mut report,
        )?));
    }
    let (active, active_state) = open_active(dir, bases[last], config, clock, &mut report)?;
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

fn file_len(path: &Path) -> Result<u64> {
    Ok(fs::metadata(path).ctx("stat", path)?.len())
}

/// A sealed segment costs one footer read; only a missing or inconsistent footer makes us
/// read the segment itself.
fn open_sealed(
    dir: &Path,
    base: u64,
    next_base: u64,
    config: &LogConfig,
    clock: &dyn Clock,
    report: &mut RecoveryReport,
) -> Result<Segment> {
    let log_path = segment::log_path(dir, base);
    let len = file_len(&log_path)?;
    let footer = index::read_footer(&segment::index_path(dir, base))?;
    if let Some(f) = footer
        && f.segment_len == len
        && f.next_offset <= next_base
    {
        let extent = Extent {
            next_offset: f.next_offset,
            max_timestamp: f.max_timestamp,
            len,
            sealed: true,
        };
        return Segment::open(dir, base, extent, false);
    }
    let segment = Segment::open(dir, base, placeholder_extent(base, len, true), false)?;
    let mut outcome = segment::scan(
        &*segment.file()?,
        &log_path,
        0,
        len,
        Some(base),
        config.max_batch_bytes,
    )?;
    // A crash during a roll, after the preallocator moved on but before the old segment's
    // zero tail was cut, leaves zeros after complete data: finish that step now.
    let len = match &outcome.stop {
        Some(stop)
            if expected_after(&outcome, base) == next_base
                && all_zero(&segment, stop.position, len)? =>
        {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&log_path)
                .ctx("open", &log_path)?;
            file.set_len(stop.position)
                .and_then(|()| file.sync_all())
                .ctx("drop the preallocated tail of", &log_path)?;
            let end = stop.position;
            outcome.stop = None;
            end
        }
        _ => len,
    };
    // An intact footer that claims more bytes and offsets than the file holds means the file
    // lost its end, even when the cut falls on a batch boundary and the scan finds no bad
    // batch. (A footer claiming offsets past `next_base` is not this segment's.)
    let scanned_next = expected_after(&outcome, base);
    if scanned_next > next_base {
        // Two segments claim the same offsets: no rule says which records are the real
        // ones, so an operator must look (repair would have to guess).
        return Err(StorageError::CorruptLog {
            dir: dir.to_path_buf(),
            file: log_path,
            position: outcome.valid_end,
            detail: format!(
                "the segment holds offsets up to {} but the next segment starts at {next_base}",
                scanned_next - 1
            ),
            lost: next_base..scanned_next,
        });
    }
    let stop = outcome.stop.clone().or_else(|| {
        footer
            .filter(|f| {
                f.segment_len > outcome.valid_end
                    && f.next_offset > scanned_next
                    && f.next_offset <= next_base
            })
            .map(|f| segment::ScanStop {
                position: outcome.valid_end,
                error: crate::batch::DecodeError::Incomplete {
                    needed: (f.segment_len - outcome.valid_end) as usize,
                    available: 0,
                },
            })
    });
    let (outcome, builder_base) = match &stop {
        None => (outcome, base),
        Some(stop) => {
            let lost = expected_after(&outcome, base)..next_base;
            if !config.repair {
                return Err(corrupt_log(dir, &log_path, stop, lost));
            }
            drop(segment);
            let known_end = KnownEnd::NextSegment(next_base);
            let repaired = repair(dir, base, len, known_end, config, clock, report)?;
            (repaired, base)
        }
    };
    let segment_len = outcome.valid_end;
    let (entries, builder) = build_entries(
        builder_base,
        config,
        &outcome.batches,
        IndexBuilder::new(builder_base, config.index_interval_bytes),
        Vec::new(),
    );
    let next_offset = outcome
        .batches
        .last()
        .map_or(base, |(_, h)| h.next_offset());
    write_sealed_index(
        dir,
        base,
        &entries,
        next_offset,
        builder.max_timestamp(),
        segment_len,
    )?;
    report.rebuilt_indexes.push(segment::index_path(dir, base));
    tracing::warn!(segment = %log_path.display(), "rebuilt a missing or damaged segment index");
    let extent = Extent {
        next_offset,
        max_timestamp: builder.max_timestamp(),
        len: segment_len,
        sealed: true,
    };
    let segment = Segment::open(dir, base, extent, false)?;
    *segment.index.write().expect("index lock") = None;
    Ok(segment)
}

fn placeholder_extent(base: u64, len: u64, sealed: bool) -> Extent {
    Extent {
        next_offset: base,
        max_timestamp: i64::MIN,
        len,
        sealed,
    }
}

fn expected_after(outcome: &ScanOutcome, base: u64) -> u64 {
    outcome
        .batches
        .last()
        .map_or(base, |(_, h)| h.next_offset())
}

fn corrupt_log(
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

/// The active segment: trust what the checkpoint (or a footer left by an interrupted roll)
/// proves durable, scan the rest, and cut a torn tail.
fn open_active(
    dir: &Path,
    base: u64,
    config: &LogConfig,
    clock: &dyn Clock,
    report: &mut RecoveryReport,
) -> Result<(Arc<Segment>, ActiveState)> {
    let log_path = segment::log_path(dir, base);
    let index_path = segment::index_path(dir, base);
    let mut len = file_len(&log_path)?;
    let footer = index::read_footer(&index_path)?.filter(|f| f.segment_len <= len);
    let checkpoint = Checkpoint::read(dir).filter(|c| c.segment_base == base);
    // Bytes below `trusted_len` were fsynced before the checkpoint (or footer) was written.
    let (trusted_len, trusted_next) = match (checkpoint, footer) {
        (Some(c), _) => (c.position, c.next_offset),
        (None, Some(f)) => (f.segment_len, f.next_offset),
        (None, None) => (0, base),
    };
    let mut entries = match footer {
        Some(f) => index::load_sealed(&index_path, &f)?.unwrap_or_default(),
        None => index::load_active_prefix(&index_path, trusted_len)?,
    };
    // An entry past the end of a file that lost bytes the checkpoint vouched for would start
    // the scan beyond the data and misplace the damage.
    entries.retain(|e| (e.position as u64) < trusted_len.min(len));
    // Resume at the last trusted entry: it is a batch boundary whose state the entry records.
    let (scan_from, expected, builder) = match entries.pop() {
        Some(e) => (
            e.position as u64,
            base + e.relative_offset as u64,
            IndexBuilder::resume_at(base, config.index_interval_bytes, &e),
        ),
        None => (
            0,
            base,
            IndexBuilder::new(base, config.index_interval_bytes),
        ),
    };
    let segment = Segment::open(dir, base, placeholder_extent(base, len, false), true)?;
    let mut outcome = segment::scan(
        &*segment.file()?,
        &log_path,
        scan_from,
        len,
        Some(expected),
        config.max_batch_bytes,
    )?;
    report.scanned_bytes = outcome.valid_end - scan_from;
    // Zeros written ahead of the data by the preallocator end the log cleanly: nothing was
    // ever written there, so there is nothing to report.
    if let Some(stop) = &outcome.stop
        && stop.position >= trusted_len
        && all_zero(&segment, stop.position, len)?
    {
        segment
            .file()?
            .set_len(stop.position)
            .ctx("drop the preallocated tail of", &log_path)?;
        len = stop.position;
        outcome.stop = None;
    }
    let mut next_offset = expected_after(&outcome, expected);
    let mut builder = builder;
    let following = outcome
        .stop
        .as_ref()
        .and_then(|stop| intact_batch_after(&segment, stop.position, len, next_offset, config));
    let damaged = match (&outcome.stop, following) {
        (Some(stop), _) if stop.position < trusted_len => true,
        (Some(stop), Some((next_intact, _))) => {
            !is_torn_write(&segment, stop.position, next_intact, len, config)?
        }
        (Some(_), None) => false,
        (None, _) => outcome.valid_end < trusted_len,
    };
    if damaged {
        let stop = outcome.stop.clone().unwrap_or_else(|| segment::ScanStop {
            position: outcome.valid_end,
            error: crate::batch::DecodeError::Incomplete {
                needed: (trusted_len - outcome.valid_end) as usize,
                available: 0,
            },
        });
        // Up to the intact batch that follows, or else to what the checkpoint vouches for.
        let lost = next_offset
            ..following
                .map_or(trusted_next, |(_, h)| h.base_offset)
                .max(next_offset);
        if !config.repair {
            return Err(corrupt_log(dir, &log_path, &stop, lost));
        }
        drop(segment);
        let known_end = KnownEnd::Durable(trusted_next);
        outcome = repair(dir, base, len, known_end, config, clock, report)?;
        entries.clear();
        builder = IndexBuilder::new(base, config.index_interval_bytes);
        len = outcome.valid_end;
        // Offsets up to what was durable may have been seen by readers: never hand them out
        // again, even though their data is gone.
        next_offset = expected_after(&outcome, base).max(trusted_next);
        let _ = fs::remove_file(&index_path);
    } else if let Some(stop) = &outcome.stop {
        let cut = stop.position..len;
        tracing::warn!(
            segment = %log_path.display(),
            from = cut.start, to = cut.end,
            reason = %stop.error,
            "truncating a torn tail left by an interrupted write"
        );
        metrics::counter!("ferry_storage_recovery_truncated_bytes_total")
            .increment(cut.end - cut.start);
        segment
            .file()?
            .set_len(stop.position)
            .ctx("truncate torn tail of", &log_path)?;
        segment.file()?.sync_all().ctx("fsync", &log_path)?;
        report.truncated = Some((log_path.clone(), cut));
        len = stop.position;
    }
    // A repair can leave the data ending below offsets the checkpoint vouches for (they were
    // reported lost): they stay retired on every later open, not only the repairing one.
    next_offset = next_offset.max(trusted_next);
    let (entries, builder) = build_entries(base, config, &outcome.batches, builder, entries);
    // The index file is rewritten to match what was recovered; from here the writer appends.
    let mut index_bytes = Vec::with_capacity(entries.len() * index::ENTRY_LEN);
    for e in &entries {
        e.encode(&mut index_bytes);
    }
    fs_util::write_atomic(&index_path, &index_bytes)?;
    let segment = Arc::new(Segment::open(
        dir,
        base,
        Extent {
            next_offset,
            max_timestamp: builder.max_timestamp(),
            len,
            sealed: false,
        },
        true,
    )?);
    *segment.index.write().expect("index lock") = Some(entries);
    let created_ms = checkpoint.map_or_else(|| clock.now_ms(), |c| c.segment_created_ms);
    let state = ActiveState {
        file: segment.file()?,
        segment: segment.clone(),
        len,
        next_offset,
        created_ms,
        index: builder,
        index_file_len: index_bytes.len() as u64,
    };
    // The recovered end is durable now (the scan read it back and the truncation was synced),
    // so the next open need not scan it again.
    segment.file()?.sync_data().ctx("fsync", &log_path)?;
    Checkpoint {
        segment_base: base,
        position: len,
        next_offset,
        max_timestamp: state.index.max_timestamp(),
        segment_created_ms: created_ms,
    }
    .write(dir)?;
    Ok((segment, state))
}

/// True when `[from, to)` of the segment holds only zero bytes.
fn all_zero(segment: &Segment, from: u64, to: u64) -> Result<bool> {
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

/// Whether a bad batch at `position`, past the checkpoint and followed by an intact batch at
/// `next_intact`, is a torn write rather than damage to acknowledged data.
///
/// Under `Fsync` only the last group write can be unsynced. Written into preallocated blocks,
/// a power loss may persist its pages in any order, leaving holes (zeros) followed by intact
/// batches of the same group. So it is a torn write only if
/// - no intact batch ending a group is followed by more intact data (which would put the
///   damage in an earlier, synced and acknowledged group), and
/// - the bad stretch holds an aligned 512-byte sector of zeros: what a write that never
///   reached the disk leaves in preallocated space. Bit rot flips bytes; it leaves no hole.
fn is_torn_write(
    segment: &Segment,
    position: u64,
    next_intact: u64,
    len: u64,
    config: &LogConfig,
) -> Result<bool> {
    Ok(
        !group_end_followed_by_data(segment, next_intact, len, config)
            && holds_zero_sector(segment, position, next_intact)?,
    )
}

fn group_end_followed_by_data(segment: &Segment, from: u64, len: u64, config: &LogConfig) -> bool {
    let Ok(file) = segment.file() else {
        return false;
    };
    let mut from = from;
    let mut group_ended = false;
    while let Some((at, _)) = segment::find_next_batch(&file, from, len, 0, config.max_batch_bytes)
    {
        if group_ended {
            return true;
        }
        let Ok(run) = segment::scan(
            &file,
            &segment.log_path,
            at,
            len,
            None,
            config.max_batch_bytes,
        ) else {
            return false;
        };
        for (_, header) in &run.batches {
            if group_ended {
                return true;
            }
            group_ended = header.is_group_end();
        }
        match run.stop {
            Some(stop) => from = stop.position + 1,
            None => return false,
        }
    }
    false
}

fn holds_zero_sector(segment: &Segment, from: u64, to: u64) -> Result<bool> {
    const SECTOR: u64 = 512;
    let first = from.div_ceil(SECTOR) * SECTOR;
    if first + SECTOR > to {
        return Ok(false);
    }
    let bytes = segment.read_at(first, (to - first) as usize)?;
    Ok(bytes
        .chunks_exact(SECTOR as usize)
        .any(|sector| sector.iter().all(|&b| b == 0)))
}

/// The first intact batch (at or after `next_offset`) after the batch at `position` that
/// failed: if there is one, the damage is in the middle, not a torn end. The failed batch's
/// length is not trusted to say where that batch starts: it may be the damaged field.
fn intact_batch_after(
    segment: &Segment,
    position: u64,
    len: u64,
    next_offset: u64,
    config: &LogConfig,
) -> Option<(u64, BatchHeader)> {
    segment::find_next_batch(
        &*segment.file().ok()?,
        position + 1,
        len,
        next_offset,
        config.max_batch_bytes,
    )
}

fn build_entries(
    base: u64,
    _config: &LogConfig,
    batches: &[(u64, BatchHeader)],
    mut builder: IndexBuilder,
    mut entries: Vec<IndexEntry>,
) -> (Vec<IndexEntry>, IndexBuilder) {
    debug_assert!(batches.iter().all(|(_, h)| h.base_offset >= base));
    for (position, header) in batches {
        if let Some(entry) = builder.note(*position, header) {
            entries.push(entry);
        }
    }
    (entries, builder)
}

pub(crate) fn write_sealed_index(
    dir: &Path,
    base: u64,
    entries: &[IndexEntry],
    next_offset: u64,
    max_timestamp: i64,
    segment_len: u64,
) -> Result<()> {
    let mut bytes = Vec::with_capacity(entries.len() * index::ENTRY_LEN + index::FOOTER_LEN);
    for e in entries {
        e.encode(&mut bytes);
    }
    Footer {
        entry_count: entries.len() as u64,
        next_offset,
        max_timestamp,
        segment_len,
        entries_crc: crc32c::crc32c(&bytes),
    }
    .encode(&mut bytes);
    fs_util::write_atomic(&segment::index_path(dir, base), &bytes)
}

/// Loads a sealed segment's index for a read, rebuilding it from the log if it went missing
/// or was damaged after the log was opened.
pub(crate) fn load_or_rebuild_index(
    segment: &Segment,
    config: &LogConfig,
) -> Result<Vec<IndexEntry>> {
    let extent = segment.extent();
    if let Some(footer) = index::read_footer(&segment.index_path)?
        && footer.segment_len == extent.len
        && let Some(entries) = index::load_sealed(&segment.index_path, &footer)?
    {
        return Ok(entries);
    }
    let outcome = segment::scan(
        &*segment.file()?,
        &segment.log_path,
        0,
        extent.len,
        Some(segment.base_offset),
        config.max_batch_bytes,
    )?;
    if let Some(stop) = &outcome.stop {
        return Err(StorageError::Corrupt {
            file: segment.log_path.clone(),
            position: stop.position,
            offset: expected_after(&outcome, segment.base_offset),
            detail: stop.error.to_string(),
        });
    }
    let builder = IndexBuilder::new(segment.base_offset, config.index_interval_bytes);
    let (entries, builder) = build_entries(
        segment.base_offset,
        config,
        &outcome.batches,
        builder,
        Vec::new(),
    );
    // A retired segment's path names the file that replaced it: its index is not ours to write.
    if segment.is_retired() {
        return Ok(entries);
    }
    let dir = segment.log_path.parent().unwrap_or(Path::new("."));
    write_sealed_index(
        dir,
        segment.base_offset,
        &entries,
        extent.next_offset,
        builder.max_timestamp(),
        extent.len,
    )?;
    tracing::warn!(segment = %segment.log_path.display(), "rebuilt a missing or damaged segment index");
    Ok(entries)
}

/// The first offset known to lie beyond a damaged segment's data.
#[derive(Debug, Clone, Copy)]
enum KnownEnd {
    /// A sealed segment: the next segment's base, which its batches must stay below.
    NextSegment(u64),
    /// The active segment: what the checkpoint proved durable; later batches are its own.
    Durable(u64),
}

/// Repair on the operator's request: copy the damaged segment to `quarantine/`, rewrite it
/// with every batch that still verifies, and report the offsets that could not be saved.
fn repair(
    dir: &Path,
    base: u64,
    len: u64,
    known_end: KnownEnd,
    config: &LogConfig,
    clock: &dyn Clock,
    report: &mut RecoveryReport,
) -> Result<ScanOutcome> {
    let log_path = segment::log_path(dir, base);
    let file = fs::File::open(&log_path).ctx("open", &log_path)?;
    let mut kept: Vec<(u64, BatchHeader)> = Vec::new();
    let mut lost = Vec::new();
    let mut pos = 0;
    let mut expected = base;
    while pos < len {
        let outcome = segment::scan(&file, &log_path, pos, len, None, config.max_batch_bytes)?;
        kept.extend(
            outcome
                .batches
                .iter()
                .filter(|(_, h)| h.base_offset >= expected)
                .copied(),
        );
        expected = kept.last().map_or(expected, |(_, h)| h.next_offset());
        let Some(stop) = outcome.stop else { break };
        // Resynchronise on the next intact batch. The damaged batch's length may be the
        // damaged field, so search for the next batch rather than trust it.
        let resync = segment::find_next_batch(
            &file,
            stop.position + 1,
            len,
            expected,
            config.max_batch_bytes,
        );
        match resync {
            Some((next, header)) => {
                if header.base_offset > expected {
                    lost.push(expected..header.base_offset);
                }
                pos = next;
            }
            None => break,
        }
    }
    // Batches that verify but claim offsets the next segment starts with: which copy holds
    // the real records is not for repair to guess, the same refusal as without repair. It
    // comes before anything is copied or rewritten, so the directory stays as it was.
    if let KnownEnd::NextSegment(next_base) = known_end
        && expected > next_base
    {
        let position = kept
            .iter()
            .find(|(_, h)| h.next_offset() > next_base)
            .map_or(0, |(position, _)| *position);
        return Err(StorageError::CorruptLog {
            dir: dir.to_path_buf(),
            file: log_path,
            position,
            detail: format!(
                "the batches that verify hold offsets up to {} but the next segment starts at {next_base}",
                expected - 1
            ),
            lost: next_base..expected,
        });
    }
    let known_end = match known_end {
        KnownEnd::NextSegment(end) | KnownEnd::Durable(end) => end,
    };
    // What was known to exist past the last saved batch is gone: a damaged end, or a file cut
    // short on a batch boundary.
    if known_end > expected {
        lost.push(expected..known_end);
    }
    let quarantine = dir.join(QUARANTINE_DIR);
    fs_util::create_dir_durable(&quarantine)?;
    let name = log_path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("segment");
    let quarantined_to = quarantine.join(format!("{name}.{}", clock.now_ms()));
    fs::copy(&log_path, &quarantined_to).ctx("quarantine", &quarantined_to)?;
    fs::File::open(&quarantined_to)
        .and_then(|f| f.sync_all())
        .ctx("fsync", &quarantined_to)?;
    fs_util::sync_dir(&quarantine)?;
    // Rewrite: the saved batches, back to back, in place of the damaged file.
    let mut bytes = Vec::new();
    let mut rewritten = Vec::with_capacity(kept.len());
    for (position, header) in &kept {
        let mut buf = vec![0u8; header.length as usize];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf, *position)
            .ctx("read", &log_path)?;
        rewritten.push((bytes.len() as u64, *header));
        bytes.extend_from_slice(&buf);
    }
    fs_util::write_atomic(&log_path, &bytes)?;
    tracing::error!(
        segment = %log_path.display(),
        quarantined_to = %quarantined_to.display(),
        lost = ?lost,
        "repaired a damaged segment; the listed offsets are lost"
    );
    metrics::counter!("ferry_storage_repaired_segments_total").increment(1);
    report.repaired.push(RepairedSegment {
        file: log_path,
        quarantined_to,
        lost,
    });
    Ok(ScanOutcome {
        valid_end: bytes.len() as u64,
        batches: rewritten,
        stop: None,
    })
}
