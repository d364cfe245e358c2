//! The recovery checkpoint: a point in the active segment below which every byte is known to
//! be on disk. Recovery scans only what lies after it, so reopening a large log after a crash
//! costs the size of the unsynced tail, not the size of the log.
//!
//! Invariant: a checkpoint is written only after the fdatasync that made its `position`
//! durable. A lost or damaged checkpoint file is harmless: recovery then scans the whole
//! active segment.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::fs_util;

pub const FILE_NAME: &str = "recovery.checkpoint";
const MAGIC: u32 = 0xFE77_C4EC;
const LEN: usize = 48;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    /// Base offset of the segment the position belongs to.
    pub segment_base: u64,
    /// A batch boundary: bytes before it are durable.
    pub position: u64,
    /// The offset of the batch that starts at `position`.
    pub next_offset: u64,
    pub max_timestamp: i64,
    /// When the segment was started, by the log's clock: age-based rolling measures from
    /// here across restarts.
    pub segment_created_ms: i64,
}

pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

impl Checkpoint {
    fn encode(&self) -> [u8; LEN] {
        let mut out = [0u8; LEN];
        out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4..12].copy_from_slice(&self.segment_base.to_le_bytes());
        out[12..20].copy_from_slice(&self.position.to_le_bytes());
        out[20..28].copy_from_slice(&self.next_offset.to_le_bytes());
        out[28..36].copy_from_slice(&self.max_timestamp.to_le_bytes());
        out[36..44].copy_from_slice(&self.segment_created_ms.to_le_bytes());
        let crc = crc32c::crc32c(&out[..44]);
        out[44..48].copy_from_slice(&crc.to_le_bytes());
        out
    }

    fn decode(b: &[u8]) -> Option<Checkpoint> {
        if b.len() != LEN
            || b[0..4] != MAGIC.to_le_bytes()
            || crc32c::crc32c(&b[..44]).to_le_bytes() != b[44..48]
        {
            return None;
        }
        let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        Some(Checkpoint {
            segment_base: word(4),
            position: word(12),
            next_offset: word(20),
            max_timestamp: word(28) as i64,
            segment_created_ms: word(36) as i64,
        })
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        fs_util::write_atomic(&path(dir), &self.encode())
    }

    /// `None` for a missing or damaged checkpoint.
    pub fn read(dir: &Path) -> Option<Checkpoint> {
        std::fs::read(path(dir))
            .ok()
            .and_then(|b| Checkpoint::decode(&b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_damage() {
        let dir = tempfile::tempdir().unwrap();
        let cp = Checkpoint {
            segment_base: 10,
            position: 4096,
            next_offset: 77,
            max_timestamp: -5,
            segment_created_ms: 1234,
        };
        cp.write(dir.path()).unwrap();
        assert_eq!(Checkpoint::read(dir.path()), Some(cp));
        let mut bytes = std::fs::read(path(dir.path())).unwrap();
        bytes[13] ^= 1;
        std::fs::write(path(dir.path()), bytes).unwrap();
        assert_eq!(Checkpoint::read(dir.path()), None);
    }
}
