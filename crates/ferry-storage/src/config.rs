//! How a log is laid out and how hard it tries to keep what it acknowledged.

use std::time::Duration;

use crate::error::{Result, StorageError};

/// When an append is acknowledged relative to the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// An append returns only after its bytes are on disk (`fdatasync`). Concurrent appends
    /// share one write and one `fdatasync` (group commit).
    Fsync,
    /// An append returns once written to the page cache; the log is fsynced at this interval.
    /// A machine crash loses at most about one interval of acknowledged appends; a process
    /// crash loses nothing.
    Interval(Duration),
    /// Never fsync except when a segment is sealed or the log is closed.
    None,
}

#[derive(Debug, Clone)]
pub struct LogConfig {
    pub durability: Durability,
    /// A segment is sealed and a new one started once it would exceed this size.
    pub segment_bytes: u64,
    /// A segment is also sealed once its first record is this old (None: never by age).
    pub segment_max_age: Option<Duration>,
    /// One index entry per this many bytes of log.
    pub index_interval_bytes: u32,
    /// Largest single record (key + headers + value + framing).
    pub max_record_bytes: usize,
    /// Largest batch, i.e. all records of one append together.
    pub max_batch_bytes: usize,
    /// Most headers on one record.
    pub max_headers: usize,
    /// Upper bound of bytes coalesced into one write by group commit.
    pub max_group_bytes: usize,
    /// How often the recovery checkpoint is refreshed after a sync.
    pub checkpoint_interval: Duration,
    /// How many sealed segments keep their index loaded and their file open at once; the
    /// others cost no memory beyond a few words and no file descriptor until read.
    pub index_cache_segments: usize,
    /// Under `Fsync`, keep room ahead of the active segment's end written with zeros (by a
    /// background thread), so that appends overwrite existing blocks and each fdatasync
    /// need not commit a size change. This is the most one fill writes, and the room ahead
    /// is at most twice it: a log starts with 256 KiB fills from its first write and grows
    /// them to this size only as fast as it writes. 0 turns it off; other modes never use it.
    pub preallocate_bytes: u64,
    /// On damage in the middle of the log: quarantine the damaged segment and report the
    /// lost offsets instead of refusing to open.
    pub repair: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            durability: Durability::Fsync,
            segment_bytes: 1 << 30,
            segment_max_age: Some(Duration::from_secs(7 * 24 * 3600)),
            index_interval_bytes: 4096,
            max_record_bytes: (1 << 20) + 64 * 1024,
            max_batch_bytes: 16 << 20,
            max_headers: 256,
            max_group_bytes: 8 << 20,
            checkpoint_interval: Duration::from_secs(1),
            index_cache_segments: 32,
            preallocate_bytes: 8 << 20,
            repair: false,
        }
    }
}

impl LogConfig {
    pub fn validate(&self) -> Result<()> {
        let bad = |why: String| Err(StorageError::InvalidConfig(why));
        // Positions inside a segment are stored as u32 in the index.
        if self.segment_bytes < 4096 || self.segment_bytes > u32::MAX as u64 {
            return bad(format!(
                "segment_bytes must be between 4096 and {} (got {})",
                u32::MAX,
                self.segment_bytes
            ));
        }
        if self.index_interval_bytes == 0 {
            return bad("index_interval_bytes must be positive".into());
        }
        if self.max_batch_bytes as u64 > self.segment_bytes
            || self.max_batch_bytes > u32::MAX as usize
        {
            return bad(format!(
                "max_batch_bytes ({}) must fit in a segment ({})",
                self.max_batch_bytes, self.segment_bytes
            ));
        }
        if self.max_record_bytes == 0 || self.max_record_bytes > self.max_batch_bytes {
            return bad(format!(
                "max_record_bytes ({}) must be positive and at most max_batch_bytes ({})",
                self.max_record_bytes, self.max_batch_bytes
            ));
        }
        if self.max_headers > u16::MAX as usize {
            return bad(format!("max_headers must be at most {}", u16::MAX));
        }
        if let Durability::Interval(d) = self.durability
            && d.is_zero()
        {
            return bad("an Interval durability needs a positive interval; use Fsync".into());
        }
        if self.preallocate_bytes > 1 << 30 {
            return bad(format!(
                "preallocate_bytes must be at most 1 GiB (got {})",
                self.preallocate_bytes
            ));
        }
        if self.index_cache_segments == 0 {
            return bad("index_cache_segments must be at least 1".into());
        }
        Ok(())
    }
}
