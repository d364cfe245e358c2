//! A sealed segment on open. Its footer, when consistent with the file, is trusted without
//! reading the data; a crash during a roll leaves one without a footer (or with the
//! preallocated zeros not yet cut), which is verified and re-indexed by a scan.

use std::path::Path;

use super::rebuild::{build_entries, write_sealed_index};
use super::repair::{KnownEnd, repair};
use super::{RecoveryReport, all_zero, corrupt_log, expected_after, file_len};
use crate::clock::Clock;
use crate::config::LogConfig;
use crate::error::{IoContext, Result, StorageError};
use crate::index::{self, IndexBuilder};
use crate::segment::{self, Extent, Segment};

/// A sealed segment costs one footer read; only a missing or inconsistent footer makes us
/// read the segment itself.
pub(super) fn open(
    dir: &Path,
    base: u64,
    next_base: u64,
    config: &LogConfig,
    clock: &dyn Clock,
    report: &mut RecoveryReport,
) -> Result<Segment> {
    let log_path = segment::log_path(dir, base);
    let len = file_len(&log_path)?;
    let footer = index::read_footer(&segment::index_path(dir, base))?;
    if let Some(f) = footer
        && f.segment_len == len
        && f.next_offset <= next_base
    {
        let extent = Extent {
            next_offset: f.next_offset,
            max_timestamp: f.max_timestamp,
            len,
            sealed: true,
        };
        return Segment::open_sealed(dir, base, extent);
    }
    let segment = Segment::open_sealed(dir, base, Extent::unscanned_sealed(base, len))?;
    let mut outcome = segment::scan(
        &*segment.file()?,
        &log_path,
        0,
        len,
        Some(base),
        config.max_batch_bytes,
    )?;
    // A crash during a roll, after the preallocator moved on but before the old segment's
    // zero tail was cut, leaves zeros after complete data: finish that step now.
    let len = match &outcome.stop {
        Some(stop)
            if expected_after(&outcome, base) == next_base
                && all_zero(&segment, stop.position, len)? =>
        {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&log_path)
                .ctx("open", &log_path)?;
            file.set_len(stop.position)
                .and_then(|()| file.sync_all())
                .ctx("drop the preallocated tail of", &log_path)?;
            let end = stop.position;
            outcome.stop = None;
            end
        }
        _ => len,
    };
    // An intact footer that claims more bytes and offsets than the file holds means the file
    // lost its end, even when the cut falls on a batch boundary and the scan finds no bad
    // batch. (A footer claiming offsets past `next_base` is not this segment's.)
    let scanned_next = expected_after(&outcome, base);
    if scanned_next > next_base {
        // Two segments claim the same offsets: no rule says which records are the real
        // ones, so an operator must look (repair would have to guess).
        return Err(StorageError::CorruptLog {
            dir: dir.to_path_buf(),
            file: log_path,
            position: outcome.valid_end,
            detail: format!(
                "the segment holds offsets up to {} but the next segment starts at {next_base}",
                scanned_next - 1
            ),
            lost: next_base..scanned_next,
        });
    }
    let stop = outcome.stop.clone().or_else(|| {
        footer
            .filter(|f| {
                f.segment_len > outcome.valid_end
                    && f.next_offset > scanned_next
                    && f.next_offset <= next_base
            })
            .map(|f| segment::ScanStop {
                position: outcome.valid_end,
                error: crate::batch::DecodeError::Incomplete {
                    needed: (f.segment_len - outcome.valid_end) as usize,
                    available: 0,
                },
            })
    });
    let outcome = match &stop {
        None => outcome,
        Some(stop) => {
            let lost = expected_after(&outcome, base)..next_base;
            if !config.repair {
                return Err(corrupt_log(dir, &log_path, stop, lost));
            }
            drop(segment);
            let known_end = KnownEnd::NextSegment(next_base);
            repair(dir, base, len, known_end, config, clock, report)?
        }
    };
    let segment_len = outcome.valid_end;
    let (entries, builder) = build_entries(
        base,
        &outcome.batches,
        IndexBuilder::new(base, config.index_interval_bytes),
        Vec::new(),
    );
    let next_offset = outcome
        .batches
        .last()
        .map_or(base, |(_, h)| h.next_offset());
    write_sealed_index(
        dir,
        base,
        &entries,
        next_offset,
        builder.max_timestamp(),
        segment_len,
    )?;
    report.rebuilt_indexes.push(segment::index_path(dir, base));
    tracing::warn!(segment = %log_path.display(), "rebuilt a missing or damaged segment index");
    let extent = Extent {
        next_offset,
        max_timestamp: builder.max_timestamp(),
        len: segment_len,
        sealed: true,
    };
    let segment = Segment::open_sealed(dir, base, extent)?;
    *segment.index.write().expect("index lock") = None;
    Ok(segment)
}
