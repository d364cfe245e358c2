//! Telling a write torn by a crash, which recovery cuts off, from damage to acknowledged
//! data, which it must not hide.

use crate::batch::BatchHeader;
use crate::config::LogConfig;
use crate::error::Result;
use crate::segment::{self, Segment};

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
pub(super) fn is_torn_write(
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
pub(super) fn intact_batch_after(
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
