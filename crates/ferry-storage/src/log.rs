//! A durable, segmented, append-only log: the public face of the storage engine.
//!
//! Writes go through one writer thread that performs group commit (see `writer.rs`); reads
//! run on the caller's thread against immutable bytes below the visible end, so readers never
//! block writers.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::{JoinHandle, ThreadId};

use bytes::Bytes;

use crate::batch::{self, HEADER_LEN, NewRecord, Record, RecordBatch};
use crate::clock::{Clock, SystemClock};
use crate::config::LogConfig;
use crate::dir_lock::DirLock;
use crate::error::{Result, StorageError};
use crate::index::{self, IndexEntry};
use crate::recovery::{self, RecoveryReport};
use crate::segment::Segment;
use crate::stats::{LogStats, LogStatsSnapshot};
use crate::writer::{Command, Completion, Writer};

/// Offsets assigned to one append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: u64,
    pub last_offset: u64,
}

/// State shared by the writer thread and readers.
#[derive(Debug)]
pub(crate) struct Shared {
    pub dir: PathBuf,
    pub config: LogConfig,
    pub clock: Arc<dyn Clock>,
    /// Ordered by base offset; the last one is the active segment.
    pub segments: RwLock<Vec<Arc<Segment>>>,
    /// Offsets below this are visible to readers.
    pub visible_end: AtomicU64,
    /// Set after a failed fdatasync: nothing more is written until the log is reopened.
    pub poisoned: Mutex<Option<String>>,
    /// Sealed segments whose index is loaded, oldest first; bounded by `index_cache_segments`.
    pub loaded_indexes: Mutex<VecDeque<Arc<Segment>>>,
    /// Held by retention and compaction: both remove or replace sealed segment files, and
    /// one must never resurrect a file the other has just deleted.
    pub maintenance: Mutex<()>,
    /// Where the writer thread records its fdatasyncs and groups (maybe shared with other
    /// logs: see [`Log::open_with_stats`]).
    pub stats: Arc<LogStats>,
    /// The writer and completer threads, on which completions run.
    storage_threads: Mutex<Vec<ThreadId>>,
    /// Held until the last thread using the directory is gone, not just the `Log` handle:
    /// a log dropped from its own completion finishes closing after the handle is gone.
    _lock: DirLock,
}

impl Shared {
    pub fn register_storage_thread(&self) {
        self.storage_threads
            .lock()
            .expect("threads lock")
            .push(std::thread::current().id());
    }

    /// True on the writer or completer thread, where waiting for the log would wait for
    /// the very thread that is waiting.
    pub fn on_storage_thread(&self) -> bool {
        let current = std::thread::current().id();
        self.storage_threads
            .lock()
            .expect("threads lock")
            .contains(&current)
    }

    pub fn poison_error(&self) -> Option<StorageError> {
        self.poisoned
            .lock()
            .expect("poison lock")
            .as_ref()
            .map(|cause| StorageError::Poisoned {
                dir: self.dir.clone(),
                cause: cause.clone(),
            })
    }
}

#[derive(Debug)]
pub struct Log {
    shared: Arc<Shared>,
    sender: Option<Sender<Command>>,
    writer: Option<JoinHandle<()>>,
    recovery: RecoveryReport,
}

impl Log {
    /// Opens (creating if needed) the log in `dir` with the system clock.
    pub fn open(dir: impl AsRef<Path>, config: LogConfig) -> Result<Log> {
        Self::open_with_clock(dir, config, Arc::new(SystemClock))
    }

    pub fn open_with_clock(
        dir: impl AsRef<Path>,
        config: LogConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Log> {
        Self::open_with_stats(dir, config, clock, Arc::default())
    }

    /// Opens the log recording its writer's measurements into `stats`, which other logs
    /// may share: an owner of many logs then reads one aggregate with [`LogStats::snapshot`].
    pub fn open_with_stats(
        dir: impl AsRef<Path>,
        config: LogConfig,
        clock: Arc<dyn Clock>,
        stats: Arc<LogStats>,
    ) -> Result<Log> {
        config.validate()?;
        let dir = dir.as_ref().to_path_buf();
        crate::fs_util::create_dir_durable(&dir)?;
        let lock = DirLock::acquire(&dir)?;
        let recovered = recovery::recover(&dir, &config, clock.as_ref())?;
        let visible_end = recovered.active_state.next_offset;
        let shared = Arc::new(Shared {
            dir,
            config,
            clock,
            segments: RwLock::new(recovered.segments),
            visible_end: AtomicU64::new(visible_end),
            poisoned: Mutex::new(None),
            loaded_indexes: Mutex::new(VecDeque::new()),
            maintenance: Mutex::new(()),
            stats,
            storage_threads: Mutex::new(Vec::new()),
            _lock: lock,
        });
        let (sender, receiver) = mpsc::channel();
        let writer = Writer::new(shared.clone(), recovered.active_state, receiver, &sender)?;
        let handle = std::thread::Builder::new()
            .name("ferry-log-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| StorageError::io("spawn writer thread for", &shared.dir, e))?;
        Ok(Log {
            shared,
            sender: Some(sender),
            writer: Some(handle),
            recovery: recovered.report,
        })
    }

    /// What recovery found and did when this log was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// fdatasync durations and group commit sizes recorded so far — this log's alone, or,
    /// when its [`LogStats`] is shared, those of every log that shares it.
    pub fn stats(&self) -> LogStatsSnapshot {
        self.shared.stats.snapshot()
    }

    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.shared.config
    }

    /// Appends `records` as one batch and blocks until the log's durability holds for it.
    ///
    /// `Ok` means the records are durable under the log's [`Durability`](crate::Durability) and will be read back
    /// at the returned offsets. An error means no such promise: the records may still be
    /// found after a reopen (a write that reached the disk while its fdatasync failed), as
    /// with any broker that reports a failed produce; they never take another record's offset.
    pub fn append(&self, records: Vec<NewRecord>) -> Result<Appended> {
        self.refuse_on_storage_thread("append")?;
        let (tx, rx) = mpsc::sync_channel(1);
        self.append_then(
            records,
            Box::new(move |result| {
                let _ = tx.send(result);
            }),
        );
        rx.recv().unwrap_or(Err(StorageError::Closed))
    }

    /// Appends without blocking: `done` runs once the append is durable (or has failed), on
    /// one of the log's own threads, in offset order. It must be quick and must not wait for
    /// the log (a blocking call from there is refused); hand real work to another thread.
    pub fn append_then(&self, records: Vec<NewRecord>, done: Completion) {
        let encoded_len = match self.validate(&records) {
            Ok(len) => len,
            Err(e) => return done(Err(e)),
        };
        let command = Command::Append {
            records,
            encoded_len,
            done,
        };
        if let Err(mpsc::SendError(Command::Append { done, .. })) = self.sender().send(command) {
            done(Err(StorageError::Closed));
        }
    }

    fn validate(&self, records: &[NewRecord]) -> Result<usize> {
        if records.is_empty() {
            return Err(StorageError::EmptyAppend);
        }
        let config = &self.shared.config;
        let mut total = HEADER_LEN;
        for record in records {
            let len = record.encoded_len();
            if len > config.max_record_bytes {
                return Err(StorageError::TooLarge {
                    what: "record",
                    size: len,
                    max: config.max_record_bytes,
                });
            }
            if record.headers.len() > config.max_headers {
                return Err(StorageError::TooLarge {
                    what: "header count",
                    size: record.headers.len(),
                    max: config.max_headers,
                });
            }
            if let Some((name, _)) = record
                .headers
                .iter()
                .find(|(n, _)| n.len() > u16::MAX as usize)
            {
                return Err(StorageError::TooLarge {
                    what: "header name",
                    size: name.len(),
                    max: u16::MAX as usize,
                });
            }
            total += len;
        }
        if total > config.max_batch_bytes {
            return Err(StorageError::TooLarge {
                what: "batch",
                size: total,
                max: config.max_batch_bytes,
            });
        }
        Ok(total - HEADER_LEN)
    }

    fn sender(&self) -> &Sender<Command> {
        self.sender.as_ref().expect("sender lives until drop")
    }

    fn refuse_on_storage_thread(&self, call: &'static str) -> Result<()> {
        if self.shared.on_storage_thread() {
            return Err(StorageError::BlockingCallInCompletion { call });
        }
        Ok(())
    }

    fn round_trip(&self, make: impl FnOnce(mpsc::SyncSender<Result<()>>) -> Command) -> Result<()> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.sender()
            .send(make(tx))
            .map_err(|_| StorageError::Closed)?;
        rx.recv().unwrap_or(Err(StorageError::Closed))
    }

    /// Forces everything appended so far to disk, whatever the durability mode.
    pub fn sync(&self) -> Result<()> {
        self.refuse_on_storage_thread("sync")?;
        self.round_trip(Command::Sync)
    }

    /// Seals the active segment and starts a new one (no-op on an empty active segment).
    pub fn roll(&self) -> Result<()> {
        self.refuse_on_storage_thread("roll")?;
        self.round_trip(Command::Roll)
    }

    /// Lowest offset still held.
    pub fn start_offset(&self) -> u64 {
        self.segments()[0].base_offset
    }

    /// One past the last offset readers can see.
    pub fn end_offset(&self) -> u64 {
        self.shared.visible_end.load(Ordering::Acquire)
    }

    pub(crate) fn segments(&self) -> Vec<Arc<Segment>> {
        self.shared.segments.read().expect("segments lock").clone()
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    pub fn segment_count(&self) -> usize {
        self.shared.segments.read().expect("segments lock").len()
    }

    /// Total bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments().iter().map(|s| s.extent().len).sum()
    }

    /// Reads whole batches starting with the one that holds `from`, up to about `max_bytes`
    /// (at least one batch is returned when any is available). Every batch's checksum is
    /// verified; damage is a [`StorageError::Corrupt`] naming the file and byte.
    pub fn read_batches(&self, from: u64, max_bytes: usize) -> Result<Vec<RecordBatch>> {
        let end = self.end_offset();
        let segments = self.segments();
        let start = segments[0].base_offset;
        if from < start || from > end {
            return Err(StorageError::OffsetOutOfRange {
                requested: from,
                start,
                end,
            });
        }
        let mut out = Vec::new();
        let mut budget = max_bytes;
        let mut next = from;
        let first = segments
            .partition_point(|s| s.base_offset <= from)
            .saturating_sub(1);
        for segment in &segments[first..] {
            if next >= end || (budget == 0 && !out.is_empty()) {
                break;
            }
            let extent = segment.extent();
            if next >= extent.next_offset {
                continue;
            }
            next = next.max(segment.base_offset);
            let position = self.position_for_offset(segment, next)?;
            let (read, finished) = read_segment(
                segment,
                position,
                extent.len,
                next,
                &mut budget,
                out.len(),
                &self.shared.config,
            )?;
            if let Some(last) = read.last() {
                next = last.next_offset();
            }
            out.extend(read);
            // The budget ran out inside this segment: later segments must wait for the next
            // read, or the records in between would be skipped. (A segment may end before its
            // `next_offset` when compaction removed its last records: that is not a stop.)
            if !finished {
                break;
            }
        }
        Ok(out)
    }

    /// Reads records with offsets from `from`, up to about `max_bytes`.
    pub fn read(&self, from: u64, max_bytes: usize) -> Result<Vec<Record>> {
        Ok(self
            .read_batches(from, max_bytes)?
            .iter()
            .flat_map(|b| b.records().collect::<Vec<_>>())
            .filter(|r| r.offset >= from)
            .collect())
    }

    /// The first offset whose record timestamp is at or after `timestamp`, or `None` if every
    /// visible record is older (a reader should then start at the end).
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<u64>> {
        let end = self.end_offset();
        let segments = self.segments();
        let first = segments.partition_point(|s| s.max_timestamp_so_far() < timestamp);
        for segment in &segments[first..] {
            let extent = segment.extent();
            if extent.max_timestamp < timestamp || segment.base_offset >= end {
                continue;
            }
            let position = self.with_index(segment, |entries| {
                index::floor_by_time(entries, timestamp).map_or(0, |e| e.position as u64)
            })?;
            let mut pos = position;
            while pos < extent.len {
                let batch = read_one_batch(segment, pos, extent.len, &self.shared.config)?;
                if batch.header().max_timestamp >= timestamp
                    && let Some(r) = batch.records().find(|r| r.timestamp >= timestamp)
                {
                    return Ok(Some(r.offset));
                }
                pos += batch.header().length as u64;
            }
        }
        Ok(None)
    }

    fn position_for_offset(&self, segment: &Arc<Segment>, offset: u64) -> Result<u64> {
        let relative = (offset - segment.base_offset).min(u32::MAX as u64) as u32;
        self.with_index(segment, |entries| {
            index::floor_by_offset(entries, relative).map_or(0, |e| e.position as u64)
        })
    }

    /// Runs `f` on the segment's index, loading it first if it is a sealed segment whose index
    /// is not in memory (and evicting the least recently loaded one past the cache bound).
    pub(crate) fn with_index<T>(
        &self,
        segment: &Arc<Segment>,
        f: impl Fn(&[IndexEntry]) -> T,
    ) -> Result<T> {
        if let Some(entries) = segment.index.read().expect("index lock").as_ref() {
            return Ok(f(entries));
        }
        let entries = recovery::load_or_rebuild_index(segment, &self.shared.config)?;
        let result = f(&entries);
        *segment.index.write().expect("index lock") = Some(entries);
        let mut loaded = self.shared.loaded_indexes.lock().expect("cache lock");
        loaded.push_back(segment.clone());
        while loaded.len() > self.shared.config.index_cache_segments {
            // A retired segment (replaced by compaction) keeps its index and file for the
            // readers still holding it: its path now names another file.
            if let Some(evicted) = loaded.pop_front()
                && evicted.extent().sealed
                && !evicted.is_retired()
            {
                *evicted.index.write().expect("index lock") = None;
                evicted.release_file();
            }
        }
        Ok(result)
    }

    /// Flushes, writes a final checkpoint and stops the writer. Dropping the log does the same
    /// but cannot report a failure.
    pub fn close(mut self) -> Result<()> {
        let result = self.sync();
        self.shutdown();
        result
    }

    fn shutdown(&mut self) {
        if let Some(sender) = self.sender.take() {
            let _ = sender.send(Command::Close);
        }
        // Dropped from its own completion: the writer cannot be joined from the thread it
        // would wait for. It still drains, syncs and checkpoints on its own, and the
        // directory lock goes only when it has finished.
        if self.shared.on_storage_thread() {
            return;
        }
        if let Some(handle) = self.writer.take() {
            let _ = handle.join();
        }
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn corrupt(segment: &Segment, position: u64, offset: u64, detail: String) -> StorageError {
    StorageError::Corrupt {
        file: segment.log_path.clone(),
        position,
        offset,
        detail,
    }
}

/// Reads and verifies the batch that starts at `position`.
pub(crate) fn read_one_batch(
    segment: &Segment,
    position: u64,
    limit: u64,
    config: &LogConfig,
) -> Result<RecordBatch> {
    let head = segment.read_at(position, HEADER_LEN.min((limit - position) as usize))?;
    let header = batch::parse_header(&head, config.max_batch_bytes)
        .map_err(|e| corrupt(segment, position, segment.base_offset, e.to_string()))?;
    if position + header.length as u64 > limit {
        return Err(corrupt(
            segment,
            position,
            header.base_offset,
            "batch runs past the end of the segment".into(),
        ));
    }
    let bytes = segment.read_at(position, header.length as usize)?;
    RecordBatch::decode(bytes, config.max_batch_bytes)
        .map_err(|e| corrupt(segment, position, header.base_offset, e.to_string()))
}

/// Reads batches of one segment from `position`, skipping those wholly before `from`.
/// Reads go in chunks sized to the budget so the scan inside one index interval costs one
/// syscall; batches are sliced out of a chunk without copying. Also says whether the read
/// reached the end of the segment (rather than stopping for the budget). `already_read`
/// counts the batches the read holds from earlier segments: a read returns at least one
/// batch, however large, and only the first may overshoot the budget.
fn read_segment(
    segment: &Segment,
    mut position: u64,
    limit: u64,
    from: u64,
    budget: &mut usize,
    already_read: usize,
    config: &LogConfig,
) -> Result<(Vec<RecordBatch>, bool)> {
    let mut out = Vec::new();
    // Bounded so that a large budget reads a segment in pieces, never whole.
    let want = budget
        .saturating_add(config.index_interval_bytes as usize + HEADER_LEN)
        .clamp(64 * 1024, 8 << 20);
    let mut chunk = Bytes::new();
    let mut chunk_pos = position;
    while position < limit {
        let mut at = (position - chunk_pos) as usize;
        if chunk.len().saturating_sub(at) < HEADER_LEN {
            chunk = segment.read_at(position, (limit - position).min(want as u64) as usize)?;
            chunk_pos = position;
            at = 0;
        }
        let header = batch::parse_header(&chunk[at..], config.max_batch_bytes)
            .map_err(|e| corrupt(segment, position, from, e.to_string()))?;
        let len = header.length as usize;
        if position + len as u64 > limit {
            let detail = "batch runs past the end of the segment".to_string();
            return Err(corrupt(segment, position, header.base_offset, detail));
        }
        if chunk.len() - at < len {
            chunk = segment.read_at(
                position,
                (limit - position).min(want.max(len) as u64) as usize,
            )?;
            chunk_pos = position;
            at = 0;
        }
        if header.next_offset() > from {
            if (already_read > 0 || !out.is_empty()) && len > *budget {
                return Ok((out, false));
            }
            let batch = RecordBatch::decode(chunk.slice(at..at + len), config.max_batch_bytes)
                .map_err(|e| corrupt(segment, position, header.base_offset, e.to_string()))?;
            *budget = budget.saturating_sub(len);
            out.push(batch);
        } else {
            // Skipping on the header's word alone would trust unchecked bytes: a damaged base
            // offset or record count would make the read skip records or come back empty.
            batch::verify(&chunk[at..at + len], config.max_batch_bytes)
                .map_err(|e| corrupt(segment, position, header.base_offset, e.to_string()))?;
        }
        position += len as u64;
        if *budget == 0 && !out.is_empty() {
            return Ok((out, position >= limit));
        }
    }
    Ok((out, true))
}
