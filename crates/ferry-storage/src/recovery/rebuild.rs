//! Segment indexes rebuilt from the log.
//!
//! - **Missing or damaged index**: rebuilt from the log; the log is the source of truth. A
//!   sealed segment's index is rebuilt on open when its footer is missing or disagrees with
//!   the file, and again on a read if it went missing after the log was opened.

use std::path::Path;

use crate::batch::BatchHeader;
use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use crate::fs_util;
use crate::index::{self, Footer, IndexBuilder, IndexEntry};
use crate::segment::{self, Segment};

use super::expected_after;

pub(super) fn build_entries(
    base: u64,
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
    let (entries, builder) =
        build_entries(segment.base_offset, &outcome.batches, builder, Vec::new());
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
