//! Compaction of a topic's partitions by key (see [`TopicCompaction`]), run from topic
//! maintenance after retention.
//!
//! **What may go.** Storage compacts whole sealed segments below a bound (see
//! `ferry_storage::compaction`). The bound is the lowest of
//! - the lowest offset a subscription still holds (an unsettled reference, or its cursor):
//!   a subscription must find every record it references, so nothing at or above its hold
//!   is compacted — the same floor retention respects;
//! - the first record younger than `min_lag`, so every value stays readable that long.
//!
//! **How often.** A compaction pass reads the partition's keys, so a partition is looked at
//! no more than once per [`COMPACTION_INTERVAL_MS`], however often maintenance runs.

use std::ops::AddAssign;
use std::sync::atomic::Ordering;

use ferry_storage::{CompactionPolicy, CompactionReport};

use super::topic::Partition;
use crate::error::Result;
use crate::message::millis;
use crate::topic::{TopicCompaction, TopicSpec};

/// The least time between two compactions of one partition.
pub const COMPACTION_INTERVAL_MS: i64 = 60_000;

/// What compaction did in one maintenance pass, summed over partitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Partitions compaction looked at (throttled ones are not counted).
    pub partitions: usize,
    pub segments_rewritten: usize,
    pub segments_deleted: usize,
    /// Records removed, tombstones included.
    pub records_removed: u64,
    pub tombstones_removed: u64,
    pub bytes_reclaimed: u64,
}

impl AddAssign<&CompactionReport> for CompactionStats {
    fn add_assign(&mut self, report: &CompactionReport) {
        self.partitions += 1;
        self.segments_rewritten += report.segments_rewritten;
        self.segments_deleted += report.segments_deleted;
        self.records_removed += report.records_removed;
        self.tombstones_removed += report.tombstones_removed;
        self.bytes_reclaimed += report.bytes_before.saturating_sub(report.bytes_after);
    }
}

impl AddAssign for CompactionStats {
    fn add_assign(&mut self, other: CompactionStats) {
        self.partitions += other.partitions;
        self.segments_rewritten += other.segments_rewritten;
        self.segments_deleted += other.segments_deleted;
        self.records_removed += other.records_removed;
        self.tombstones_removed += other.tombstones_removed;
        self.bytes_reclaimed += other.bytes_reclaimed;
    }
}

impl Partition {
    /// Compacts the partition if its topic asks for it and it was not compacted within the
    /// last [`COMPACTION_INTERVAL_MS`]. `hold` is the lowest offset a subscription still
    /// needs: nothing at or above it is removed.
    pub fn compact(
        &self,
        spec: &TopicSpec,
        hold: Option<u64>,
        now_ms: i64,
    ) -> Result<CompactionStats> {
        let mut stats = CompactionStats::default();
        let Some(compaction) = spec.compaction else {
            return Ok(stats);
        };
        let checked = self.compaction_checked_ms.load(Ordering::Acquire);
        if checked != i64::MIN && now_ms.saturating_sub(checked) < COMPACTION_INTERVAL_MS {
            return Ok(stats);
        }
        self.compaction_checked_ms.store(now_ms, Ordering::Release);
        let below = self.compaction_bound(&compaction, hold, now_ms)?;
        let report = self.log.compact(&CompactionPolicy {
            below,
            tombstone_retention: compaction.tombstone_retention,
        })?;
        stats += &report;
        Ok(stats)
    }

    /// The offset below which records may be compacted now.
    fn compaction_bound(
        &self,
        compaction: &TopicCompaction,
        hold: Option<u64>,
        now_ms: i64,
    ) -> Result<u64> {
        let end = self.log.end_offset();
        let lagged = if compaction.min_lag.is_zero() {
            end
        } else {
            // The first record younger than `min_lag`: one exactly that old may go.
            let cutoff = now_ms.saturating_sub(millis(compaction.min_lag));
            self.log
                .offset_for_timestamp(cutoff.saturating_add(1))?
                .unwrap_or(end)
        };
        Ok(hold.map_or(lagged, |h| h.min(lagged)))
    }
}
