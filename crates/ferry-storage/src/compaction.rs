//! Compaction by key: keep only the latest record of each key in sealed segments.
//!
//! A record is removed when a later record (anywhere in the log) has the same key, or when it
//! is a tombstone (a key with an empty value) whose timestamp is older than the
//! `tombstone_retention` grace: a reader that saw the key's earlier value has had that long to
//! see its deletion. Records without a key are always kept. Records keep their offsets, so a
//! compacted log has gaps, inside a segment and between segments; reads step over them.
//!
//! Only sealed segments wholly below `below` are rewritten (never the active one), one at a
//! time: the kept records are written to `<segment>.log.compact.tmp`, fsynced, and renamed over
//! the segment. A segment left with no records is deleted, as retention would.
//!
//! Crash windows, in the order of the steps:
//! 1. **Temporary file written**: recovery deletes every `*.tmp` file; the old segment and its
//!    index are untouched.
//! 2. **Old index removed**: it described the old file and must not survive next to the new
//!    one (an index whose footer happened to match the new length would send reads to wrong
//!    positions). Recovery finds no index and rebuilds it by scanning the old file.
//! 3. **New file renamed into place**: recovery finds no index and rebuilds it by scanning
//!    the new file; the scan allows offset gaps.
//! 4. **New index written**: done.
//!
//! Readers racing with a rewrite hold the old `Segment`, which is *retired* before the rename:
//! it keeps its open descriptor and loaded index (both describe the old inode, which lives on
//! until the last reader drops it) and never reopens by path. New reads find the new segment.
//! Retention and compaction exclude each other through the log's maintenance lock, so neither
//! resurrects or deletes a file the other is replacing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::batch::{self, NewRecord, Record};
use crate::error::{IoContext, Result, StorageError};
use crate::fs_util;
use crate::index::{IndexBuilder, IndexEntry};
use crate::log::{Log, read_one_batch};
use crate::recovery;
use crate::segment::{Extent, Segment};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionPolicy {
    /// Only segments whose offsets all lie below this are compacted. The broker passes the
    /// lowest offset something still references (a subscription's unsettled message).
    pub below: u64,
    /// How long a tombstone (a key with an empty value) stays readable, by its timestamp.
    pub tombstone_retention: Duration,
}

impl CompactionPolicy {
    pub const DEFAULT_TOMBSTONE_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy {
            below: u64::MAX,
            tombstone_retention: Self::DEFAULT_TOMBSTONE_RETENTION,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Segments considered: sealed and wholly below `below`.
    pub segments_examined: usize,
    pub segments_rewritten: usize,
    pub segments_deleted: usize,
    /// Records removed, tombstones included.
    pub records_removed: u64,
    pub tombstones_removed: u64,
    /// Bytes of the examined segments before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// The log's start offset after compaction (it moves when the first segment empties).
    pub start_offset: u64,
}

/// A record is a tombstone when it has a key and an empty value.
pub fn is_tombstone(record: &Record) -> bool {
    record.key.is_some() && record.value.is_empty()
}

impl Log {
    pub fn compact(&self, policy: &CompactionPolicy) -> Result<CompactionReport> {
        let shared = self.shared().clone();
        let _maintenance = shared.maintenance.lock().expect("maintenance lock");
        let segments = self.segments();
        let sealed = &segments[..segments.len() - 1];
        let candidates: Vec<Arc<Segment>> = sealed
            .iter()
            .filter(|s| {
                let extent = s.extent();
                extent.sealed && extent.next_offset <= policy.below
            })
            .cloned()
            .collect();
        let mut report = CompactionReport {
            segments_examined: candidates.len(),
            ..Default::default()
        };
        if !candidates.is_empty() {
            let latest = self.latest_offsets()?;
            let now = shared.clock.now_ms();
            let grace = policy.tombstone_retention.as_millis().min(i64::MAX as u128) as i64;
            let tombstone_expired_before = now.saturating_sub(grace);
            for segment in &candidates {
                self.compact_segment(segment, &latest, tombstone_expired_before, &mut report)?;
            }
        }
        report.start_offset = self.start_offset();
        if report.records_removed > 0 {
            metrics::counter!("ferry_storage_compaction_removed_records_total")
                .increment(report.records_removed);
            metrics::counter!("ferry_storage_compaction_reclaimed_bytes_total")
                .increment(report.bytes_before.saturating_sub(report.bytes_after));
            tracing::info!(
                dir = %shared.dir.display(),
                removed = report.records_removed,
                rewritten = report.segments_rewritten,
                deleted = report.segments_deleted,
                "compaction removed superseded records"
            );
        }
        Ok(report)
    }

    /// The offset of the latest record of every key in the log.
    fn latest_offsets(&self) -> Result<HashMap<Bytes, u64>> {
        let mut latest = HashMap::new();
        let end = self.end_offset();
        let mut next = self.start_offset();
        while next < end {
            let batches = self.read_batches(next, 1 << 20)?;
            let Some(last) = batches.last() else { break };
            next = last.next_offset();
            for record in batches.iter().flat_map(|b| b.records()) {
                if let Some(key) = record.key {
                    // Copied: a slice would keep the whole batch's buffer alive in the map.
                    latest.insert(Bytes::copy_from_slice(&key), record.offset);
                }
            }
        }
        Ok(latest)
    }

    fn compact_segment(
        &self,
        segment: &Arc<Segment>,
        latest: &HashMap<Bytes, u64>,
        tombstone_expired_before: i64,
        report: &mut CompactionReport,
    ) -> Result<()> {
        let config = &self.shared().config;
        let extent = segment.extent();
        report.bytes_before += extent.len;
        // Kept records, grouped by the batch they came from: a run from one batch re-encodes
        // into batches no larger than the original, so `max_batch_bytes` still holds.
        let mut kept: Vec<Vec<Record>> = Vec::new();
        let (mut removed, mut tombstones) = (0u64, 0u64);
        let mut position = 0;
        while position < extent.len {
            let batch = read_one_batch(segment, position, extent.len, config)?;
            position += batch.header().length as u64;
            let mut run: Vec<Record> = Vec::new();
            for record in batch.records() {
                let superseded = record
                    .key
                    .as_ref()
                    .is_some_and(|k| latest.get(k).is_some_and(|&o| o != record.offset));
                let expired = is_tombstone(&record) && record.timestamp < tombstone_expired_before;
                if superseded || expired {
                    removed += 1;
                    tombstones += is_tombstone(&record) as u64;
                    if !run.is_empty() {
                        kept.push(std::mem::take(&mut run));
                    }
                } else {
                    run.push(record);
                }
            }
            if !run.is_empty() {
                kept.push(run);
            }
        }
        if removed == 0 {
            report.bytes_after += extent.len;
            return Ok(());
        }
        report.records_removed += removed;
        report.tombstones_removed += tombstones;
        // Readers holding this segment keep its file and index; load the index while the file
        // on disk is still the one it describes.
        segment.retire()?;
        let index = self.with_index(segment, |entries| entries.to_vec())?;
        *segment.index.write().expect("index lock") = Some(index);
        if kept.is_empty() {
            self.delete_emptied(segment)?;
            report.segments_deleted += 1;
        } else {
            let len = self.rewrite(segment, &kept)?;
            report.segments_rewritten += 1;
            report.bytes_after += len;
        }
        Ok(())
    }

    /// Replaces `segment` with a file holding only `kept`; returns the new length.
    fn rewrite(&self, segment: &Arc<Segment>, kept: &[Vec<Record>]) -> Result<u64> {
        let shared = self.shared();
        let config = &shared.config;
        let base = segment.base_offset;
        let mut bytes = BytesMut::new();
        let mut builder = IndexBuilder::new(base, config.index_interval_bytes);
        let mut entries: Vec<IndexEntry> = Vec::new();
        for run in kept {
            let records: Vec<NewRecord> = run
                .iter()
                .map(|r| NewRecord {
                    timestamp: Some(r.timestamp),
                    key: r.key.clone(),
                    headers: r.headers.clone(),
                    value: r.value.clone(),
                })
                .collect();
            let start = bytes.len();
            let header = batch::encode(&mut bytes, run[0].offset, &records, 0);
            // Each batch is complete on its own; recovery treats none as a torn group.
            batch::mark_group_end(&mut bytes[start..]);
            if let Some(entry) = builder.note(start as u64, &header) {
                entries.push(entry);
            }
        }
        let len = bytes.len() as u64;
        let tmp = segment.log_path.with_extension("log.compact.tmp");
        {
            use std::io::Write;
            let mut file = std::fs::File::create(&tmp).ctx("create", &tmp)?;
            file.write_all(&bytes).ctx("write", &tmp)?;
            file.sync_all().ctx("fsync", &tmp)?;
        }
        remove_if_present(&segment.index_path, "delete index")?;
        fs_util::sync_dir(&shared.dir)?;
        std::fs::rename(&tmp, &segment.log_path).ctx("rename into place", &segment.log_path)?;
        fs_util::sync_dir(&shared.dir)?;
        let extent = Extent {
            // The segment still owns its whole offset range, gaps included.
            next_offset: segment.extent().next_offset,
            max_timestamp: builder.max_timestamp(),
            len,
            sealed: true,
        };
        let replacement = Arc::new(Segment::open_sealed(&shared.dir, base, extent)?);
        replacement.earlier_max_timestamp.store(
            segment
                .earlier_max_timestamp
                .load(std::sync::atomic::Ordering::Acquire),
            std::sync::atomic::Ordering::Release,
        );
        *replacement.index.write().expect("index lock") = Some(entries.clone());
        self.replace_segment(segment, Some(replacement.clone()));
        // In memory the replacement is complete; a failure here only leaves the index to be
        // rebuilt by the next load or open.
        recovery::write_sealed_index(
            &shared.dir,
            base,
            &entries,
            extent.next_offset,
            extent.max_timestamp,
            len,
        )?;
        Ok(len)
    }

    /// Deletes a segment compaction emptied: log first, then index, as retention does.
    fn delete_emptied(&self, segment: &Arc<Segment>) -> Result<()> {
        self.replace_segment(segment, None);
        std::fs::remove_file(&segment.log_path)
            .map_err(|e| StorageError::io("delete segment", &segment.log_path, e))?;
        remove_if_present(&segment.index_path, "delete index")?;
        fs_util::sync_dir(&self.shared().dir)
    }

    /// Swaps `old` for `new` (or drops it) in the segment list and the index cache.
    fn replace_segment(&self, old: &Arc<Segment>, new: Option<Arc<Segment>>) {
        let shared = self.shared();
        {
            let mut segments = shared.segments.write().expect("segments lock");
            if let Some(i) = segments.iter().position(|s| Arc::ptr_eq(s, old)) {
                match new {
                    Some(new) => segments[i] = new,
                    None => {
                        segments.remove(i);
                    }
                }
            }
        }
        shared
            .loaded_indexes
            .lock()
            .expect("cache lock")
            .retain(|s| !Arc::ptr_eq(s, old));
    }
}

fn remove_if_present(path: &std::path::Path, op: &'static str) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StorageError::io(op, path, e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[path = "compaction_tests.rs"]
mod tests;
