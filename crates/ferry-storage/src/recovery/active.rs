//! The active segment on open, and the crash windows of its tail:
//!
//! - **Torn tail** (crash mid-write, or power loss before fdatasync): the active segment ends
//!   in a partial or unchecksummed batch after the checkpoint. It is truncated, and the byte
//!   range is logged and counted. Under `Fsync` at most one group is written and not yet
//!   synced at any moment, so a torn write spans at most one group; within that span a hole
//!   followed by intact batches (pages persisted out of order into preallocated blocks) is
//!   still a torn write. The checkpoint lags the last sync by up to `checkpoint_interval`,
//!   so acknowledged batches can lie past it: damage to the last of them is indistinguishable
//!   from a torn write and is reported as a truncation.
//! - **Preallocated zeros** after the data end the log cleanly and are cut without a report.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use super::rebuild::build_entries;
use super::repair::{KnownEnd, repair};
use super::torn::{intact_batch_after, is_torn_write};
use super::{RecoveryReport, all_zero, corrupt_log, expected_after, file_len};
use crate::checkpoint::Checkpoint;
use crate::clock::Clock;
use crate::config::LogConfig;
use crate::error::{IoContext, Result};
use crate::fs_util;
use crate::index::{self, IndexBuilder};
use crate::segment::{self, Extent, Segment};
use crate::writer::ActiveState;

/// The active segment: trust what the checkpoint (or a footer left by an interrupted roll)
/// proves durable, scan the rest, and cut a torn tail.
pub(super) fn open(
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
    let segment = Segment::open_active(dir, base, Extent::unscanned_active(base, len))?;
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
    let (entries, builder) = build_entries(base, &outcome.batches, builder, entries);
    // The index file is rewritten to match what was recovered; from here the writer appends.
    let mut index_bytes = Vec::with_capacity(entries.len() * index::ENTRY_LEN);
    for e in &entries {
        e.encode(&mut index_bytes);
    }
    fs_util::write_atomic(&index_path, &index_bytes)?;
    let segment = Arc::new(Segment::open_active(
        dir,
        base,
        Extent {
            next_offset,
            max_timestamp: builder.max_timestamp(),
            len,
            sealed: false,
        },
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
