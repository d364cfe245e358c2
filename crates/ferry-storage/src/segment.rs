//! One segment: a `<base offset>.log` file of batches plus its sparse index, and the scan that
//! walks and verifies batches for recovery and index rebuilds.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, RwLock};

use bytes::{Bytes, BytesMut};

use crate::batch::{self, BatchHeader, DecodeError, HEADER_LEN};
use crate::error::{IoContext, Result};
use crate::index::IndexEntry;

pub const LOG_SUFFIX: &str = "log";
pub const INDEX_SUFFIX: &str = "index";

pub fn log_path(dir: &Path, base_offset: u64) -> PathBuf {
    dir.join(format!("{base_offset:020}.{LOG_SUFFIX}"))
}
pub fn index_path(dir: &Path, base_offset: u64) -> PathBuf {
    dir.join(format!("{base_offset:020}.{INDEX_SUFFIX}"))
}

/// What readers may see of a segment. For the active segment `len` and `next_offset` only
/// move once the batches below them are durable (under `Fsync`) or written (otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub next_offset: u64,
    pub max_timestamp: i64,
    pub len: u64,
    pub sealed: bool,
}

impl Extent {
    /// A sealed segment known only by its length, until a scan finds what it holds.
    pub fn unscanned_sealed(base_offset: u64, len: u64) -> Extent {
        Extent {
            next_offset: base_offset,
            max_timestamp: i64::MIN,
            len,
            sealed: true,
        }
    }

    /// The active segment known only by its length, until a scan finds what it holds.
    pub fn unscanned_active(base_offset: u64, len: u64) -> Extent {
        Extent {
            sealed: false,
            ..Extent::unscanned_sealed(base_offset, len)
        }
    }
}

#[derive(Debug)]
pub struct Segment {
    pub base_offset: u64,
    pub log_path: PathBuf,
    pub index_path: PathBuf,
    /// Open while the segment is active or recently read; a sealed segment's descriptor is
    /// closed when its index leaves the cache, so a log of thousands of segments does not
    /// hold thousands of descriptors.
    handle: RwLock<Option<Arc<File>>>,
    pub extent: RwLock<Extent>,
    /// `None` while a sealed segment's index is not loaded; loaded on first read.
    pub index: RwLock<Option<Vec<IndexEntry>>>,
    /// The largest record timestamp in all segments before this one (including any since
    /// removed by retention). With the segment's own maximum it gives a value that never
    /// decreases along the log, so a read by time finds its segment by binary search even
    /// though record timestamps need not be ordered.
    pub earlier_max_timestamp: AtomicI64,
    /// Set when compaction has replaced this segment's file: the path names the new file, so
    /// this segment keeps its open descriptor and loaded index until the last reader holding
    /// it is done, and never reopens or re-indexes by path.
    retired: AtomicBool,
}

impl Segment {
    /// A sealed segment: nothing is opened until a read needs the file.
    pub fn open_sealed(dir: &Path, base_offset: u64, extent: Extent) -> Result<Segment> {
        debug_assert!(extent.sealed);
        Ok(Segment::with_handle(dir, base_offset, extent, None))
    }

    /// The active segment: its file is opened now for appending, and created if missing.
    pub fn open_active(dir: &Path, base_offset: u64, extent: Extent) -> Result<Segment> {
        debug_assert!(!extent.sealed);
        let log_path = log_path(dir, base_offset);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&log_path)
            .ctx("open segment", &log_path)?;
        Ok(Segment::with_handle(
            dir,
            base_offset,
            extent,
            Some(Arc::new(file)),
        ))
    }

    fn with_handle(
        dir: &Path,
        base_offset: u64,
        extent: Extent,
        handle: Option<Arc<File>>,
    ) -> Segment {
        Segment {
            base_offset,
            index_path: index_path(dir, base_offset),
            log_path: log_path(dir, base_offset),
            handle: RwLock::new(handle),
            extent: RwLock::new(extent),
            index: RwLock::new(None),
            earlier_max_timestamp: AtomicI64::new(i64::MIN),
            retired: AtomicBool::new(false),
        }
    }

    pub fn extent(&self) -> Extent {
        *self.extent.read().expect("extent lock")
    }

    /// The largest record timestamp in this segment or any before it.
    pub fn max_timestamp_so_far(&self) -> i64 {
        self.earlier_max_timestamp
            .load(Ordering::Acquire)
            .max(self.extent().max_timestamp)
    }

    /// The segment's file, opened for reading if it is not open.
    pub fn file(&self) -> Result<Arc<File>> {
        if let Some(file) = self.handle.read().expect("handle lock").as_ref() {
            return Ok(file.clone());
        }
        let mut handle = self.handle.write().expect("handle lock");
        if let Some(file) = handle.as_ref() {
            return Ok(file.clone());
        }
        let file = Arc::new(File::open(&self.log_path).ctx("open segment", &self.log_path)?);
        *handle = Some(file.clone());
        Ok(file)
    }

    /// Pins the current file open for good: called before compaction renames a new file over
    /// this one's path, so readers holding this segment keep reading the bytes its extent and
    /// index describe.
    pub fn retire(&self) -> Result<()> {
        self.file()?;
        self.retired.store(true, Ordering::Release);
        Ok(())
    }

    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// Closes a sealed segment's descriptor; readers holding it keep it until they finish.
    pub fn release_file(&self) {
        if self.extent().sealed && !self.is_retired() {
            *self.handle.write().expect("handle lock") = None;
        }
    }

    pub fn read_at(&self, position: u64, len: usize) -> Result<Bytes> {
        let mut buf = BytesMut::zeroed(len);
        self.file()?
            .read_exact_at(&mut buf, position)
            .ctx("read segment", &self.log_path)?;
        Ok(buf.freeze())
    }
}

/// Where and why a scan stopped before the end it was given.
#[derive(Debug, Clone)]
pub struct ScanStop {
    pub position: u64,
    pub error: DecodeError,
}

#[derive(Debug, Default)]
pub struct ScanOutcome {
    /// Verified batches in order, with their positions.
    pub batches: Vec<(u64, BatchHeader)>,
    /// End of the last verified batch.
    pub valid_end: u64,
    pub stop: Option<ScanStop>,
}

/// Walks batches in `[from, end)` of `file`, verifying each checksum and that offsets run on
/// without gaps from `expected_offset`. Stops at the first batch that fails.
pub fn scan(
    file: &File,
    path: &Path,
    from: u64,
    end: u64,
    mut expected_offset: Option<u64>,
    max_batch_len: usize,
) -> Result<ScanOutcome> {
    // Large sequential reads: recovery of a gigabyte tail must not pay a syscall per batch.
    const CHUNK: usize = 4 << 20;
    let mut outcome = ScanOutcome {
        valid_end: from,
        ..Default::default()
    };
    let mut chunk_start = from;
    let mut chunk: Vec<u8> = Vec::new();
    let mut pos = from;
    while pos < end {
        let in_chunk = (pos - chunk_start) as usize;
        let available = chunk.len().saturating_sub(in_chunk);
        let header = match batch::parse_header(&chunk[in_chunk.min(chunk.len())..], max_batch_len) {
            Ok(h) if available >= h.length as usize => Ok(h),
            Ok(h) => Err(DecodeError::Incomplete {
                needed: h.length as usize,
                available,
            }),
            Err(e) => Err(e),
        };
        let header = match header {
            Ok(h) => h,
            Err(DecodeError::Incomplete { needed, .. }) if pos + (available as u64) < end => {
                let want = (end - pos).min(CHUNK.max(needed) as u64) as usize;
                chunk.resize(want, 0);
                file.read_exact_at(&mut chunk, pos)
                    .ctx("scan segment", path)?;
                chunk_start = pos;
                continue;
            }
            Err(error) => {
                outcome.stop = Some(ScanStop {
                    position: pos,
                    error,
                });
                return Ok(outcome);
            }
        };
        let bytes = &chunk[in_chunk..in_chunk + header.length as usize];
        if let Err(error) = batch::verify(bytes, max_batch_len) {
            outcome.stop = Some(ScanStop {
                position: pos,
                error,
            });
            return Ok(outcome);
        }
        // Offsets only move forward. A gap is legal (repair leaves one where data was lost);
        // a batch that goes backwards is damage the checksum could not see.
        if let Some(expected) = expected_offset
            && header.base_offset < expected
        {
            outcome.stop = Some(ScanStop {
                position: pos,
                error: DecodeError::BadHeader(format!(
                    "base offset {} where {expected} was expected",
                    header.base_offset
                )),
            });
            return Ok(outcome);
        }
        expected_offset = Some(header.next_offset());
        outcome.batches.push((pos, header));
        pos += header.length as u64;
        outcome.valid_end = pos;
    }
    Ok(outcome)
}

/// Checks whether a valid batch starts at `position`: used to tell damage in the middle of a
/// log (intact data follows) from a torn tail (nothing valid follows).
pub fn valid_batch_at(
    file: &File,
    position: u64,
    end: u64,
    max_batch_len: usize,
) -> Option<BatchHeader> {
    if position + HEADER_LEN as u64 > end {
        return None;
    }
    let mut head = [0u8; HEADER_LEN];
    file.read_exact_at(&mut head, position).ok()?;
    let header = batch::parse_header(&head, max_batch_len).ok()?;
    if position + header.length as u64 > end {
        return None;
    }
    let mut whole = vec![0u8; header.length as usize];
    file.read_exact_at(&mut whole, position).ok()?;
    batch::verify(&whole, max_batch_len).ok()
}

/// Finds the first position in `[from, end)` where a batch starts that verifies and whose base
/// offset is at least `min_offset`. Used after damage, when the damaged batch's own length
/// cannot be trusted to say where the next batch starts: candidates are found by their magic,
/// version and attributes bytes and then verified whole.
pub fn find_next_batch(
    file: &File,
    from: u64,
    end: u64,
    min_offset: u64,
    max_batch_len: usize,
) -> Option<(u64, BatchHeader)> {
    const WINDOW: u64 = 1 << 20;
    // Bytes 4..8 of a header: magic (little endian), version, attributes (0).
    let [m0, m1] = batch::MAGIC.to_le_bytes();
    let mut start = from;
    while start + HEADER_LEN as u64 <= end {
        // Windows overlap by the 8 bytes a candidate check looks at.
        let len = (end - start).min(WINDOW + 8) as usize;
        let mut window = vec![0u8; len];
        file.read_exact_at(&mut window, start).ok()?;
        for i in 0..len.saturating_sub(7).min(WINDOW as usize) {
            if window[i + batch::MAGIC_AT] == m0
                && window[i + batch::MAGIC_AT + 1] == m1
                && window[i + batch::VERSION_AT] == batch::VERSION
                && window[i + batch::ATTRIBUTES_AT] & !batch::ATTR_GROUP_END == 0
            {
                let position = start + i as u64;
                if let Some(header) = valid_batch_at(file, position, end, max_batch_len)
                    && header.base_offset >= min_offset
                {
                    return Some((position, header));
                }
            }
        }
        start += WINDOW;
    }
    None
}
