//! What a log's writer thread measures about its own work: how long each fdatasync of
//! segment data took, and how many records and bytes each group commit wrote.
//!
//! These are the numbers that explain a slow publish — a slow disk, or groups too small to
//! amortise the fdatasync — so they are kept always, not only when a `metrics` recorder is
//! installed. A recorder is process-global, and one process may hold several brokers (tests
//! do) whose numbers must not mix; [`LogStats`] belongs to whoever opened the log instead,
//! and may be shared by several logs so that an owner reads one aggregate, which also
//! outlives any one of them (a histogram of a deleted queue's log does not vanish from the
//! sum, so the sum never goes backwards).
//!
//! The writer thread is the only one that records into a log's stats, and it records once
//! per group: two relaxed atomic adds per histogram, beside a write and an fdatasync that
//! take microseconds to milliseconds. Buckets are fixed, so a reader needs no lock either.
//! A snapshot read while the writer records may see an observation in a bucket and not yet
//! in the sum; the count is taken from the buckets, so it always equals their total.

use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds of the fdatasync buckets, in nanoseconds: from a fast NVMe drive's flush
/// (tens of microseconds) to a stalled one.
pub const FSYNC_BOUNDS_NS: &[u64] = &[
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    10_000_000_000,
];

/// Upper bounds of the records-per-group buckets: powers of two up to 65,536.
pub const COMMIT_RECORDS_BOUNDS: &[u64] = &[
    1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536,
];

/// Upper bounds of the bytes-per-group buckets: powers of four from 256 bytes to 64 MiB
/// (a group stops growing at `LogConfig::max_group_bytes`, 8 MiB by default).
pub const COMMIT_BYTES_BOUNDS: &[u64] = &[
    256,
    1 << 10,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
    64 << 20,
];

/// A histogram over fixed bounds that one thread records into and any thread reads.
#[derive(Debug)]
struct AtomicHistogram {
    bounds: &'static [u64],
    /// One per bound, then one for everything above the last bound.
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl AtomicHistogram {
    fn new(bounds: &'static [u64]) -> AtomicHistogram {
        debug_assert!(bounds.is_sorted());
        AtomicHistogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    fn record(&self, value: u64) {
        let bucket = self.bounds.partition_point(|&bound| bound < value);
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds: self.bounds,
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

/// A histogram's state at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Inclusive upper bounds of the buckets, in the histogram's unit.
    pub bounds: &'static [u64],
    /// Observations per bucket, not cumulative: one per bound, then one for the values
    /// above the last bound.
    pub counts: Vec<u64>,
    /// Sum of all observed values, in the histogram's unit.
    pub sum: u64,
}

impl HistogramSnapshot {
    /// An empty histogram over `bounds`.
    pub fn empty(bounds: &'static [u64]) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0,
        }
    }

    /// How many values were observed.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(upper bound, observations at or below it)` per bound; the values above the last
    /// bound are `count() - ` the last of these.
    pub fn cumulative(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.bounds
            .iter()
            .zip(&self.counts)
            .scan(0, |total, (&bound, &n)| {
                *total += n;
                Some((bound, *total))
            })
    }

    /// Adds `other`'s observations. Both must be over the same bounds (every histogram of
    /// one kind is).
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        assert_eq!(
            self.bounds, other.bounds,
            "histograms over different bounds"
        );
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.sum += other.sum;
    }
}

/// Where a log's writer thread records what it does; see the module docs. Share one
/// between logs (through [`Log::open_with_stats`](crate::Log::open_with_stats)) to read
/// their sum.
#[derive(Debug)]
pub struct LogStats {
    fsync_ns: AtomicHistogram,
    commit_records: AtomicHistogram,
    commit_bytes: AtomicHistogram,
}

impl Default for LogStats {
    fn default() -> Self {
        LogStats {
            fsync_ns: AtomicHistogram::new(FSYNC_BOUNDS_NS),
            commit_records: AtomicHistogram::new(COMMIT_RECORDS_BOUNDS),
            commit_bytes: AtomicHistogram::new(COMMIT_BYTES_BOUNDS),
        }
    }
}

impl LogStats {
    /// One fdatasync of segment data that succeeded, and how long it took.
    pub(crate) fn record_fsync(&self, nanos: u64) {
        self.fsync_ns.record(nanos);
    }

    /// One group written to the segment (and synced, under `Durability::Fsync`).
    pub(crate) fn record_commit(&self, records: u64, bytes: u64) {
        self.commit_records.record(records);
        self.commit_bytes.record(bytes);
    }

    pub fn snapshot(&self) -> LogStatsSnapshot {
        LogStatsSnapshot {
            fsync_ns: self.fsync_ns.snapshot(),
            commit_records: self.commit_records.snapshot(),
            commit_bytes: self.commit_bytes.snapshot(),
        }
    }
}

/// [`LogStats`] at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogStatsSnapshot {
    /// Duration of each successful fdatasync of segment data, in nanoseconds: the sync that
    /// appends wait for under `Durability::Fsync`, and the periodic or explicit sync under
    /// the other modes. (Syncs of index files and directories when a segment rolls are not
    /// included.)
    pub fsync_ns: HistogramSnapshot,
    /// Records per group written.
    pub commit_records: HistogramSnapshot,
    /// Bytes per group written, batch headers included.
    pub commit_bytes: HistogramSnapshot,
}

impl Default for LogStatsSnapshot {
    fn default() -> Self {
        LogStatsSnapshot {
            fsync_ns: HistogramSnapshot::empty(FSYNC_BOUNDS_NS),
            commit_records: HistogramSnapshot::empty(COMMIT_RECORDS_BOUNDS),
            commit_bytes: HistogramSnapshot::empty(COMMIT_BYTES_BOUNDS),
        }
    }
}

impl LogStatsSnapshot {
    pub fn merge(&mut self, other: &LogStatsSnapshot) {
        self.fsync_ns.merge(&other.fsync_ns);
        self.commit_records.merge(&other.commit_records);
        self.commit_bytes.merge(&other.commit_bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_the_first_bucket_whose_bound_holds_them() {
        let h = AtomicHistogram::new(&[1, 4, 16]);
        for v in [0, 1, 2, 4, 5, 16, 17, 1000] {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!(s.counts, vec![2, 2, 2, 2]);
        assert_eq!(s.count(), 8);
        assert_eq!(s.sum, 1 + 2 + 4 + 5 + 16 + 17 + 1000);
        let cumulative: Vec<_> = s.cumulative().collect();
        assert_eq!(cumulative, vec![(1, 2), (4, 4), (16, 6)]);
    }

    #[test]
    fn merged_snapshots_add_up_bucket_by_bucket() {
        let (a, b) = (LogStats::default(), LogStats::default());
        a.record_commit(1, 100);
        b.record_commit(3, 5000);
        b.record_fsync(2_000_000);
        let mut sum = a.snapshot();
        sum.merge(&b.snapshot());
        assert_eq!(sum.commit_records.count(), 2);
        assert_eq!(sum.commit_records.sum, 4);
        assert_eq!(sum.commit_bytes.sum, 5100);
        assert_eq!(sum.fsync_ns.count(), 1);
        let at_1ms = sum.fsync_ns.cumulative().find(|&(b, _)| b == 1_000_000);
        let at_2_5ms = sum.fsync_ns.cumulative().find(|&(b, _)| b == 2_500_000);
        assert_eq!(
            (at_1ms, at_2_5ms),
            (Some((1_000_000, 0)), Some((2_500_000, 1)))
        );
    }
}
