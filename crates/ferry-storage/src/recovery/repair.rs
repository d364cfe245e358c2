//! Damage in the middle of the log, and the repair an operator may ask for:
//!
//! - **Damage in the middle** (bit rot, a bad sector, a truncated sealed segment): a bad batch
//!   below the checkpoint, or one followed by intact batches beyond one group, means
//!   acknowledged data is gone. The log refuses to open unless repair is asked for; repair
//!   copies the segment to `quarantine/`, keeps every batch that still verifies and reports
//!   the lost offsets. Lost data is reported, never silently dropped.

use std::fs;
use std::path::Path;

use super::{QUARANTINE_DIR, RecoveryReport, RepairedSegment};
use crate::batch::BatchHeader;
use crate::clock::Clock;
use crate::config::LogConfig;
use crate::error::{IoContext, Result, StorageError};
use crate::fs_util;
use crate::segment::{self, ScanOutcome};

/// The first offset known to lie beyond a damaged segment's data.
#[derive(Debug, Clone, Copy)]
pub(super) enum KnownEnd {
    /// A sealed segment: the next segment's base, which its batches must stay below.
    NextSegment(u64),
    /// The active segment: what the checkpoint proved durable; later batches are its own.
    Durable(u64),
}

/// Repair on the operator's request: copy the damaged segment to `quarantine/`, rewrite it
/// with every batch that still verifies, and report the offsets that could not be saved.
pub(super) fn repair(
    dir: &Path,
    base: u64,
    len: u64,
    known_end: KnownEnd,
    config: &LogConfig,
    clock: &dyn Clock,
    report: &mut RecoveryReport,
) -> Result<ScanOutcome> {
    let log_path = segment::log_path(dir, base);
    let file = fs::File::open(&log_path).ctx("open", &log_path)?;
    let mut kept: Vec<(u64, BatchHeader)> = Vec::new();
    let mut lost = Vec::new();
    let mut pos = 0;
    let mut expected = base;
    while pos < len {
        let outcome = segment::scan(&file, &log_path, pos, len, None, config.max_batch_bytes)?;
        kept.extend(
            outcome
                .batches
                .iter()
                .filter(|(_, h)| h.base_offset >= expected)
                .copied(),
        );
        expected = kept.last().map_or(expected, |(_, h)| h.next_offset());
        let Some(stop) = outcome.stop else { break };
        // Resynchronise on the next intact batch. The damaged batch's length may be the
        // damaged field, so search for the next batch rather than trust it.
        let resync = segment::find_next_batch(
            &file,
            stop.position + 1,
            len,
            expected,
            config.max_batch_bytes,
        );
        match resync {
            Some((next, header)) => {
                if header.base_offset > expected {
                    lost.push(expected..header.base_offset);
                }
                pos = next;
            }
            None => break,
        }
    }
    // Batches that verify but claim offsets the next segment starts with: which copy holds
    // the real records is not for repair to guess, the same refusal as without repair. It
    // comes before anything is copied or rewritten, so the directory stays as it was.
    if let KnownEnd::NextSegment(next_base) = known_end
        && expected > next_base
    {
        let position = kept
            .iter()
            .find(|(_, h)| h.next_offset() > next_base)
            .map_or(0, |(position, _)| *position);
        return Err(StorageError::CorruptLog {
            dir: dir.to_path_buf(),
            file: log_path,
            position,
            detail: format!(
                "the batches that verify hold offsets up to {} but the next segment starts at {next_base}",
                expected - 1
            ),
            lost: next_base..expected,
        });
    }
    let known_end = match known_end {
        KnownEnd::NextSegment(end) | KnownEnd::Durable(end) => end,
    };
    // What was known to exist past the last saved batch is gone: a damaged end, or a file cut
    // short on a batch boundary.
    if known_end > expected {
        lost.push(expected..known_end);
    }
    let quarantine = dir.join(QUARANTINE_DIR);
    fs_util::create_dir_durable(&quarantine)?;
    let name = log_path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("segment");
    let quarantined_to = quarantine.join(format!("{name}.{}", clock.now_ms()));
    fs::copy(&log_path, &quarantined_to).ctx("quarantine", &quarantined_to)?;
    fs::File::open(&quarantined_to)
        .and_then(|f| f.sync_all())
        .ctx("fsync", &quarantined_to)?;
    fs_util::sync_dir(&quarantine)?;
    // Rewrite: the saved batches, back to back, in place of the damaged file.
    let mut bytes = Vec::new();
    let mut rewritten = Vec::with_capacity(kept.len());
    for (position, header) in &kept {
        let mut buf = vec![0u8; header.length as usize];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf, *position)
            .ctx("read", &log_path)?;
        rewritten.push((bytes.len() as u64, *header));
        bytes.extend_from_slice(&buf);
    }
    fs_util::write_atomic(&log_path, &bytes)?;
    tracing::error!(
        segment = %log_path.display(),
        quarantined_to = %quarantined_to.display(),
        lost = ?lost,
        "repaired a damaged segment; the listed offsets are lost"
    );
    metrics::counter!("ferry_storage_repaired_segments_total").increment(1);
    report.repaired.push(RepairedSegment {
        file: log_path,
        quarantined_to,
        lost,
    });
    Ok(ScanOutcome {
        valid_end: bytes.len() as u64,
        batches: rewritten,
        stop: None,
    })
}
