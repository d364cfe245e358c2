//! The sparse per-segment index: one entry every `index_interval_bytes` of log.
//!
//! Each entry serves both lookups. `relative_offset`/`position` make a read by offset a
//! binary search plus a scan of at most one interval; `max_timestamp_before` (the largest
//! record timestamp in the segment before the entry's batch, non-decreasing by
//! construction) makes a read by time the same: every batch before an entry whose
//! `max_timestamp_before < t` holds only records older than `t`.
//!
//! File layout (`<base offset>.index`): entries of 20 bytes, each with its own CRC32C because
//! the active segment's index is appended without fsync and may be torn after a crash; a
//! sealed segment's file ends with a [`Footer`] that summarises the segment, so opening a
//! log reads one footer per sealed segment instead of scanning it.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{IoContext, Result};

pub const ENTRY_LEN: usize = 20;
pub const FOOTER_LEN: usize = 48;
const FOOTER_MAGIC: u32 = 0xFE77_1D58;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    pub relative_offset: u32,
    pub position: u32,
    pub max_timestamp_before: i64,
}

impl IndexEntry {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&self.relative_offset.to_le_bytes());
        out.extend_from_slice(&self.position.to_le_bytes());
        out.extend_from_slice(&self.max_timestamp_before.to_le_bytes());
        let crc = crc32c::crc32c(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }

    pub fn decode(bytes: &[u8]) -> Option<IndexEntry> {
        let b: &[u8; ENTRY_LEN] = bytes.get(..ENTRY_LEN)?.try_into().ok()?;
        let crc = u32::from_le_bytes(b[16..20].try_into().ok()?);
        if crc32c::crc32c(&b[..16]) != crc {
            return None;
        }
        Some(IndexEntry {
            relative_offset: u32::from_le_bytes(b[0..4].try_into().ok()?),
            position: u32::from_le_bytes(b[4..8].try_into().ok()?),
            max_timestamp_before: i64::from_le_bytes(b[8..16].try_into().ok()?),
        })
    }
}

/// What a sealed segment's index records about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    pub entry_count: u64,
    pub next_offset: u64,
    pub max_timestamp: i64,
    pub segment_len: u64,
    /// CRC32C over all entry bytes, so a lazily loaded index is checked whole.
    pub entries_crc: u32,
}

impl Footer {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&self.entry_count.to_le_bytes());
        out.extend_from_slice(&self.next_offset.to_le_bytes());
        out.extend_from_slice(&self.max_timestamp.to_le_bytes());
        out.extend_from_slice(&self.segment_len.to_le_bytes());
        out.extend_from_slice(&self.entries_crc.to_le_bytes());
        out.extend_from_slice(&FOOTER_MAGIC.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        let crc = crc32c::crc32c(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }

    pub fn decode(b: &[u8]) -> Option<Footer> {
        if b.len() != FOOTER_LEN {
            return None;
        }
        let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        let half = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        if half(36) != FOOTER_MAGIC || crc32c::crc32c(&b[..44]) != half(44) {
            return None;
        }
        Some(Footer {
            entry_count: word(0),
            next_offset: word(8),
            max_timestamp: word(16) as i64,
            segment_len: word(24),
            entries_crc: half(32),
        })
    }
}

/// Reads a sealed segment's footer; `None` when it is missing or damaged (the caller then
/// rebuilds the index from the log).
pub fn read_footer(path: &Path) -> Result<Option<Footer>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(crate::StorageError::io("open index", path, e)),
    };
    let len = file.metadata().ctx("stat index", path)?.len();
    if len < FOOTER_LEN as u64 || !(len - FOOTER_LEN as u64).is_multiple_of(ENTRY_LEN as u64) {
        return Ok(None);
    }
    let mut buf = [0u8; FOOTER_LEN];
    file.read_exact_at(&mut buf, len - FOOTER_LEN as u64)
        .ctx("read index footer", path)?;
    Ok(
        Footer::decode(&buf)
            .filter(|f| f.entry_count * ENTRY_LEN as u64 == len - FOOTER_LEN as u64),
    )
}

/// Loads a sealed index and checks it whole against its footer.
pub fn load_sealed(path: &Path, footer: &Footer) -> Result<Option<Vec<IndexEntry>>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(crate::StorageError::io("read index", path, e)),
    };
    let entries_len = footer.entry_count as usize * ENTRY_LEN;
    if bytes.len() != entries_len + FOOTER_LEN
        || crc32c::crc32c(&bytes[..entries_len]) != footer.entries_crc
    {
        return Ok(None);
    }
    let entries: Option<Vec<_>> = bytes[..entries_len]
        .chunks_exact(ENTRY_LEN)
        .map(IndexEntry::decode)
        .collect();
    Ok(entries.filter(|e| is_well_formed(e, footer.segment_len)))
}

/// Reads the entries of an active (unsealed) index, keeping the longest prefix that is
/// intact, strictly increasing, and inside the first `trusted_len` bytes of the segment.
/// Anything after is a torn tail of an index that was never fsynced.
pub fn load_active_prefix(path: &Path, trusted_len: u64) -> Result<Vec<IndexEntry>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(crate::StorageError::io("read index", path, e)),
    };
    let mut entries: Vec<IndexEntry> = Vec::new();
    for chunk in bytes.chunks_exact(ENTRY_LEN) {
        let Some(entry) = IndexEntry::decode(chunk) else {
            break;
        };
        let follows = entries.last().is_none_or(|last| {
            entry.relative_offset > last.relative_offset
                && entry.position > last.position
                && entry.max_timestamp_before >= last.max_timestamp_before
        });
        if !follows || entry.position as u64 >= trusted_len {
            break;
        }
        entries.push(entry);
    }
    Ok(entries)
}

fn is_well_formed(entries: &[IndexEntry], segment_len: u64) -> bool {
    entries.windows(2).all(|w| {
        w[1].relative_offset > w[0].relative_offset
            && w[1].position > w[0].position
            && w[1].max_timestamp_before >= w[0].max_timestamp_before
    }) && entries
        .last()
        .is_none_or(|e| (e.position as u64) < segment_len)
}

/// Entry with the greatest relative offset not above `relative_offset`.
pub fn floor_by_offset(entries: &[IndexEntry], relative_offset: u32) -> Option<&IndexEntry> {
    let n = entries.partition_point(|e| e.relative_offset <= relative_offset);
    n.checked_sub(1).map(|i| &entries[i])
}

/// Last entry whose preceding records are all older than `timestamp`: scanning from it finds
/// the first record at or after `timestamp`.
pub fn floor_by_time(entries: &[IndexEntry], timestamp: i64) -> Option<&IndexEntry> {
    let n = entries.partition_point(|e| e.max_timestamp_before < timestamp);
    n.checked_sub(1).map(|i| &entries[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(rel: u32, pos: u32, ts: i64) -> IndexEntry {
        IndexEntry {
            relative_offset: rel,
            position: pos,
            max_timestamp_before: ts,
        }
    }

    #[test]
    fn floor_lookups_find_the_nearest_entry_at_or_before() {
        let entries = vec![entry(0, 0, 0), entry(10, 4096, 50), entry(20, 8192, 90)];
        assert_eq!(floor_by_offset(&entries, 0).unwrap().position, 0);
        assert_eq!(floor_by_offset(&entries, 15).unwrap().position, 4096);
        assert_eq!(floor_by_offset(&entries, 99).unwrap().position, 8192);
        assert_eq!(floor_by_time(&entries, 50).unwrap().position, 0);
        assert_eq!(floor_by_time(&entries, 51).unwrap().position, 4096);
        assert_eq!(floor_by_time(&entries, 1000).unwrap().position, 8192);
    }

    #[test]
    fn torn_active_index_keeps_only_the_intact_increasing_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let mut bytes = Vec::new();
        for i in 0..5u32 {
            entry(i * 10, i * 4096, i as i64).encode(&mut bytes);
        }
        bytes[3 * ENTRY_LEN + 5] ^= 0xFF;
        bytes.extend_from_slice(&[1, 2, 3]);
        std::fs::write(&path, &bytes).unwrap();
        let loaded = load_active_prefix(&path, u64::MAX).unwrap();
        assert_eq!(loaded.len(), 3);
        let limited = load_active_prefix(&path, 4096).unwrap();
        assert_eq!(limited.len(), 1);
    }

    #[test]
    fn sealed_footer_round_trips_and_detects_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let mut bytes = Vec::new();
        entry(0, 0, 0).encode(&mut bytes);
        entry(9, 5000, 7).encode(&mut bytes);
        let footer = Footer {
            entry_count: 2,
            next_offset: 17,
            max_timestamp: 99,
            segment_len: 9000,
            entries_crc: crc32c::crc32c(&bytes),
        };
        footer.encode(&mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read_footer(&path).unwrap(), Some(footer));
        assert_eq!(load_sealed(&path, &footer).unwrap().unwrap().len(), 2);
        bytes[3] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(load_sealed(&path, &footer).unwrap(), None);
    }
}

/// Decides where index entries go as batches are appended (by the writer) or scanned (by
/// recovery), so both produce the same index for the same log.
#[derive(Debug, Clone)]
pub struct IndexBuilder {
    base_offset: u64,
    interval: u64,
    bytes_since_entry: u64,
    max_timestamp: i64,
}

impl IndexBuilder {
    pub fn new(base_offset: u64, interval: u32) -> Self {
        IndexBuilder {
            base_offset,
            interval: interval as u64,
            bytes_since_entry: 0,
            max_timestamp: i64::MIN,
        }
    }

    /// A builder that resumes at `entry`, which the next noted batch will re-create.
    pub fn resume_at(base_offset: u64, interval: u32, entry: &IndexEntry) -> Self {
        IndexBuilder {
            base_offset,
            interval: interval as u64,
            bytes_since_entry: interval as u64,
            max_timestamp: entry.max_timestamp_before,
        }
    }

    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    /// Records a batch written at `position`; returns the index entry it starts, if any.
    pub fn note(
        &mut self,
        position: u64,
        header: &crate::batch::BatchHeader,
    ) -> Option<IndexEntry> {
        let entry = (position == 0 || self.bytes_since_entry >= self.interval).then(|| {
            self.bytes_since_entry = 0;
            IndexEntry {
                relative_offset: (header.base_offset - self.base_offset) as u32,
                position: position as u32,
                max_timestamp_before: self.max_timestamp,
            }
        });
        self.bytes_since_entry += header.length as u64;
        self.max_timestamp = self.max_timestamp.max(header.max_timestamp);
        entry
    }
}
