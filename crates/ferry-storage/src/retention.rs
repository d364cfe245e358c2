//! Retention: deleting whole sealed segments from the front of the log.
//!
//! Only a prefix is ever deleted, so the log stays contiguous from its start offset; the
//! active segment is never deleted. A segment goes when any trigger says so: it is older
//! than `max_age` (by its newest record), the log is larger than `max_bytes`, or every
//! offset in it is below the caller's `low_watermark` (the broker passes the offset all
//! subscriptions have consumed past). `keep_from` overrides every trigger: a segment holding
//! an offset at or above it is never deleted (the broker passes the lowest offset a reader
//! still needs).

use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::fs_util;
use crate::log::Log;
use crate::segment::Segment;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    pub max_age: Option<Duration>,
    pub max_bytes: Option<u64>,
    pub low_watermark: Option<u64>,
    /// Never delete a segment holding this offset or a later one.
    pub keep_from: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionReport {
    pub deleted_segments: usize,
    pub deleted_bytes: u64,
    /// The log's start offset after retention.
    pub start_offset: u64,
}

impl Log {
    /// The start offset the log would have if `policy` were applied now: where a caller
    /// that must release what retention will delete (a subscription's references) stops.
    /// Applying the same policy with `keep_from` at that offset then deletes no more.
    pub fn start_offset_after_retention(&self, policy: &RetentionPolicy) -> u64 {
        let shared = self.shared();
        let now = shared.clock.now_ms();
        let segments = shared.segments.read().expect("segments lock");
        // Never past the active segment, which is never deleted: `count < len`.
        segments[doomed_prefix(&segments, policy, now)].base_offset
    }

    pub fn apply_retention(&self, policy: &RetentionPolicy) -> Result<RetentionReport> {
        let shared = self.shared();
        let _maintenance = shared.maintenance.lock().expect("maintenance lock");
        let now = shared.clock.now_ms();
        let doomed: Vec<Arc<Segment>> = {
            let mut segments = shared.segments.write().expect("segments lock");
            let count = doomed_prefix(&segments, policy, now);
            segments.drain(..count).collect()
        };
        let mut report = RetentionReport {
            start_offset: self.start_offset(),
            ..Default::default()
        };
        // Every doomed segment is already gone from memory: try to delete them all even if
        // one fails, so none comes back on reopen while the rest are gone; report the first
        // failure after the directory is synced and the index cache cleaned.
        let mut first_error = None;
        for segment in &doomed {
            // Log first, index second: a crash in between leaves an orphaned index, which the
            // next open deletes, rather than a segment without an index.
            let deleted = std::fs::remove_file(&segment.log_path)
                .map_err(|e| crate::StorageError::io("delete segment", &segment.log_path, e))
                .and_then(|()| match std::fs::remove_file(&segment.index_path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(
                        crate::StorageError::io("delete index", &segment.index_path, e),
                    ),
                    _ => Ok(()),
                });
            match deleted {
                Ok(()) => {
                    report.deleted_segments += 1;
                    report.deleted_bytes += segment.extent().len;
                    tracing::info!(segment = %segment.log_path.display(), "retention deleted segment");
                }
                Err(e) => {
                    tracing::error!(segment = %segment.log_path.display(), error = %e, "retention could not delete segment");
                    first_error.get_or_insert(e);
                }
            }
        }
        if !doomed.is_empty() {
            shared
                .loaded_indexes
                .lock()
                .expect("cache lock")
                .retain(|s| !doomed.iter().any(|d| Arc::ptr_eq(d, s)));
            fs_util::sync_dir(&shared.dir)?;
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        Ok(report)
    }
}

/// How many segments from the front `policy` deletes.
fn doomed_prefix(segments: &[Arc<Segment>], policy: &RetentionPolicy, now: i64) -> usize {
    let mut total: u64 = segments.iter().map(|s| s.extent().len).sum();
    let mut count = 0;
    // The last segment is the active one and is never deleted, sealed or not.
    let deletable = segments.len().saturating_sub(1);
    for segment in segments[..deletable].iter() {
        let extent = segment.extent();
        if !extent.sealed {
            break;
        }
        if policy
            .keep_from
            .is_some_and(|keep| extent.next_offset > keep)
        {
            break;
        }
        let too_old = policy
            .max_age
            .is_some_and(|age| extent.max_timestamp < now.saturating_sub(age.as_millis() as i64));
        let too_big = policy.max_bytes.is_some_and(|max| total > max);
        let consumed = policy
            .low_watermark
            .is_some_and(|w| extent.next_offset <= w);
        if !(too_old || too_big || consumed) {
            break;
        }
        total -= extent.len;
        count += 1;
    }
    count
}
