//! The writer thread: group commit.
//!
//! Appenders only validate and enqueue. The writer takes everything queued, encodes it into
//! one buffer, issues one write and (under `Fsync`) one `fdatasync`, then completes every
//! request of the group. While it waits on the disk new requests queue up and form the next
//! group, so the number of fsyncs per second stays at the device's limit while the records
//! per fsync grow with the load.
//!
//! Under `Fsync` the fdatasync runs on a sync thread (see `syncer.rs`): while it runs the
//! writer writes the next group and may start a second sync for it, so a group arriving
//! during a slow sync does not wait for that sync's end before its own starts. A group is
//! completed once a sync that started after its write returned has succeeded, and groups
//! are completed strictly in order (a later sync finishing first covers the earlier groups).
//!
//! Failure rules:
//! - a failed write (ENOSPC, EROFS…) truncates the segment back to where the group started,
//!   fails the group's requests and leaves the log as it was: later appends may succeed;
//! - a failed `fdatasync` poisons the log: after it the kernel may have dropped the dirty
//!   pages, so nothing written since the last good sync can be trusted (the PostgreSQL
//!   "fsyncgate" lesson). The requests fail and so does every later append, until reopen.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::time::{Duration, Instant};

use bytes::BytesMut;

use crate::batch::{self, BatchHeader, HEADER_LEN, NewRecord};
use crate::checkpoint::Checkpoint;
use crate::config::Durability;
use crate::error::{IoContext, Result, StorageError};
use crate::fs_util;
use crate::index::{self, Footer, IndexBuilder};
use crate::log::{Appended, Shared};
use crate::preallocate::Preallocator;
use crate::segment::{Extent, Segment};
use crate::syncer::{Synced, Syncer};

pub type Completion = Box<dyn FnOnce(Result<Appended>) + Send>;

pub(crate) enum Command {
    Append {
        records: Vec<NewRecord>,
        encoded_len: usize,
        done: Completion,
    },
    Sync(SyncSender<Result<()>>),
    Roll(SyncSender<Result<()>>),
    /// A sync thread finished an fdatasync: its result waits in the syncer.
    Synced,
    /// The log is closing: finish what is queued before this, then stop. (The sync threads
    /// hold senders too, so the channel never disconnects while the writer lives.)
    Close,
}

/// What recovery hands the writer about the active segment.
#[derive(Debug, Clone)]
pub(crate) struct ActiveState {
    pub segment: Arc<Segment>,
    /// The segment's file, open for writing for as long as it is active.
    pub file: Arc<File>,
    pub len: u64,
    pub next_offset: u64,
    pub created_ms: i64,
    pub index: IndexBuilder,
    /// Bytes of index entries already in the index file.
    pub index_file_len: u64,
}

struct Pending {
    done: Completion,
    header: BatchHeader,
    position: u64,
}

/// A group written under `Fsync` whose sync has not finished yet.
struct WrittenGroup {
    /// Where the group ends in the active segment: a sync up to here covers it.
    end: u64,
    written: u64,
    pending: Vec<Pending>,
}

/// Completions of one group, handed to the completer thread.
type Completed = Vec<(Completion, Result<Appended>)>;

/// Waking the appenders of a group costs a futex wake each; done on the writer thread it
/// kept the disk idle for longer than the fdatasync itself at 64 appenders. A second thread
/// wakes them while the writer already starts the next group. Groups this small are
/// completed inline, where the extra hop would only add latency — but only when the
/// completer has nothing queued, so completions always run in offset order.
const INLINE_COMPLETIONS: usize = 2;

/// The longest a group waits for stragglers (see `worth_lingering`): a fraction of one
/// fdatasync on a fast disk.
const LINGER: Duration = Duration::from_micros(50);

pub(crate) struct Writer {
    shared: Arc<Shared>,
    completer: Option<(Sender<Completed>, std::thread::JoinHandle<()>)>,
    /// Groups handed to the completer and not yet completed.
    completer_backlog: Arc<AtomicUsize>,
    prealloc: Option<Preallocator>,
    average_group_bytes: u64,
    /// Appends in the last group written, to judge whether the next one is filling up.
    last_group_appends: usize,
    active: ActiveState,
    index_file: File,
    unwritten_index: Vec<u8>,
    synced_len: u64,
    /// Where readers see the active segment end: the end of the last completed group.
    published_len: u64,
    /// Under `Fsync`: the threads that run the fdatasyncs.
    syncer: Option<Syncer>,
    /// Written groups awaiting their sync, in offset order.
    unsynced: VecDeque<WrittenGroup>,
    /// The end of the data the last started sync covers.
    sync_target: u64,
    closing: bool,
    buf: BytesMut,
    pending: Vec<Pending>,
    last_sync: Instant,
    last_checkpoint: Instant,
    receiver: Receiver<Command>,
}

impl Writer {
    pub fn new(
        shared: Arc<Shared>,
        active: ActiveState,
        receiver: Receiver<Command>,
        wake: &Sender<Command>,
    ) -> Result<Self> {
        let index_file = open_index(&active.segment)?;
        let (sender, completions) = mpsc::channel::<Completed>();
        let completer_backlog = Arc::new(AtomicUsize::new(0));
        let backlog = completer_backlog.clone();
        let completer_shared = shared.clone();
        let handle = std::thread::Builder::new()
            .name("ferry-log-completer".into())
            .spawn(move || {
                completer_shared.register_storage_thread();
                for group in completions {
                    for (done, result) in group {
                        done(result);
                    }
                    backlog.fetch_sub(1, Ordering::Release);
                }
            })
            .map_err(|e| StorageError::io("spawn completer thread for", &shared.dir, e))?;
        let config = &shared.config;
        let prealloc = if config.durability == Durability::Fsync && config.preallocate_bytes > 0 {
            let p = Preallocator::start(
                active.segment.clone(),
                active.len,
                config.preallocate_bytes,
            )
            .map_err(|e| StorageError::io("spawn preallocation thread for", &shared.dir, e))?;
            Some(p)
        } else {
            None
        };
        let syncer = if config.durability == Durability::Fsync {
            let s = Syncer::start(wake)
                .map_err(|e| StorageError::io("spawn sync thread for", &shared.dir, e))?;
            Some(s)
        } else {
            None
        };
        Ok(Writer {
            completer: Some((sender, handle)),
            completer_backlog,
            prealloc,
            average_group_bytes: 0,
            last_group_appends: 0,
            synced_len: active.len,
            published_len: active.len,
            syncer,
            unsynced: VecDeque::new(),
            sync_target: active.len,
            closing: false,
            shared,
            active,
            index_file,
            unwritten_index: Vec::new(),
            buf: BytesMut::with_capacity(1 << 20),
            pending: Vec::new(),
            last_sync: Instant::now(),
            last_checkpoint: Instant::now(),
            receiver,
        })
    }

    pub fn run(mut self) {
        self.shared.register_storage_thread();
        loop {
            let command = match self.next_timer() {
                Some(wait) => self.receiver.recv_timeout(wait),
                None => self
                    .receiver
                    .recv()
                    .map_err(|_| RecvTimeoutError::Disconnected),
            };
            match command {
                Ok(Command::Synced) => self.collect_synced(),
                Ok(Command::Close) => break,
                Ok(first) => self.process_group(first),
                Err(RecvTimeoutError::Timeout) => self.on_timer(),
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if self.closing {
                break;
            }
        }
        self.shutdown();
    }

    /// How long until a periodic sync or checkpoint is due, if any is pending.
    fn next_timer(&self) -> Option<Duration> {
        if self.synced_len == self.active.len || self.shared.poison_error().is_some() {
            return None;
        }
        let interval = match self.shared.config.durability {
            Durability::Interval(d) => d,
            _ => return None,
        };
        Some(interval.saturating_sub(self.last_sync.elapsed()))
    }

    fn on_timer(&mut self) {
        if let Err(e) = self.sync_active() {
            tracing::error!(dir = %self.shared.dir.display(), error = %e, "periodic log sync failed");
        }
    }

    fn process_group(&mut self, first: Command) {
        let max_group = self.shared.config.max_group_bytes;
        let started = Instant::now();
        let mut next = Some(first);
        while let Some(command) = next.take() {
            match command {
                Command::Append {
                    records,
                    encoded_len,
                    done,
                } => self.stage(records, encoded_len, done),
                Command::Sync(reply) => {
                    let result = self.flush().and_then(|()| self.sync_active());
                    let _ = reply.send(result);
                }
                Command::Roll(reply) => {
                    let result = self.flush().and_then(|()| {
                        if self.active.len > 0 {
                            self.roll()
                        } else {
                            Ok(())
                        }
                    });
                    let _ = reply.send(result);
                }
                Command::Synced => self.collect_synced(),
                Command::Close => self.closing = true,
            }
            if self.buf.len() < max_group && !self.closing {
                next = self.receiver.try_recv().ok();
                if next.is_none() && self.worth_lingering(started) {
                    let wait = LINGER.saturating_sub(started.elapsed());
                    next = self.receiver.recv_timeout(wait).ok();
                }
            }
        }
        self.last_group_appends = self.pending.len();
        if let Err(e) = self.flush() {
            tracing::warn!(dir = %self.shared.dir.display(), error = %e, "group write failed");
        }
        // Under steady load the receive never times out, so the interval sync is also
        // checked after every group.
        if let Durability::Interval(interval) = self.shared.config.durability
            && self.last_sync.elapsed() >= interval
        {
            self.on_timer();
        }
    }

    /// Whether to wait briefly for more appends before writing the group. Under `Fsync`
    /// with many appenders in flight, the previous group's appenders resubmit one by one as
    /// their completions run; writing as soon as the first few arrive splits them over two
    /// fdatasyncs. Waiting a few tens of microseconds while the group is clearly short of the
    /// last one's size fills it instead. A lone appender never waits: its last group was one.
    fn worth_lingering(&self, started: Instant) -> bool {
        self.shared.config.durability == Durability::Fsync
            && self.last_group_appends >= 4
            && self.pending.len() < self.last_group_appends * 3 / 4
            && started.elapsed() < LINGER
    }

    /// Encodes one append into the group buffer, rolling the segment first if it would not fit.
    fn stage(&mut self, records: Vec<NewRecord>, encoded_len: usize, done: Completion) {
        if let Some(e) = self.shared.poison_error() {
            return done(Err(e));
        }
        let batch_len = (HEADER_LEN + encoded_len) as u64;
        let now = self.shared.clock.now_ms();
        if self.needs_roll(batch_len, records.len() as u64, now)
            && let Err(e) = self.flush().and_then(|()| self.roll())
        {
            return done(Err(e));
        }
        let position = self.active.len + self.buf.len() as u64;
        let base_offset = self.staged_next_offset();
        let header = batch::encode(&mut self.buf, base_offset, &records, now);
        self.pending.push(Pending {
            done,
            header,
            position,
        });
    }

    fn staged_next_offset(&self) -> u64 {
        let written = self.unsynced.back().and_then(|g| g.pending.last());
        self.pending
            .last()
            .or(written)
            .map_or(self.active.next_offset, |p| p.header.next_offset())
    }

    fn needs_roll(&self, batch_len: u64, count: u64, now: i64) -> bool {
        let staged = self.active.len + self.buf.len() as u64;
        if staged == 0 {
            return false;
        }
        let config = &self.shared.config;
        let too_big = staged + batch_len > config.segment_bytes;
        let too_many =
            self.staged_next_offset() + count - self.active.segment.base_offset > u32::MAX as u64;
        let too_old = config.segment_max_age.is_some_and(|age| {
            now.saturating_sub(self.active.created_ms) >= age.as_millis() as i64
        });
        too_big || too_many || too_old
    }

    /// Writes the staged group, syncs it if the durability asks for it, publishes it to
    /// readers and completes its requests.
    fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.make_room_for_a_sync();
        let pending = std::mem::take(&mut self.pending);
        // A sync that failed while this group was staged: it would never get a sync of its own.
        if self.syncer.is_some()
            && let Some(e) = self.shared.poison_error()
        {
            self.buf.clear();
            self.fail_all(pending, &e);
            return Err(e);
        }
        let segment = self.active.segment.clone();
        let start = self.active.len;
        if let Some(last) = pending.last() {
            let at = (last.position - start) as usize;
            batch::mark_group_end(&mut self.buf[at..at + last.header.length as usize]);
        }
        // An exponentially weighted average (1/16 weight) of the group size decides whether
        // preallocation is worth it; a single burst does not flip it.
        let group = self.buf.len() as u64;
        self.average_group_bytes =
            self.average_group_bytes - self.average_group_bytes / 16 + group / 16;
        if let Some(p) = &self.prealloc {
            p.before_write(
                start + group,
                crate::preallocate::worth_it(self.average_group_bytes),
            );
        }
        let file = self.active.file.clone();
        if let Err(source) = file.write_all_at(&self.buf, start) {
            self.buf.clear();
            let error = StorageError::io("append to", &segment.log_path, source);
            // The groups written before this one complete first: completions stay in order.
            self.drain_syncs();
            // Undo a partial write so the file ends on a batch boundary again.
            let undone = match &self.prealloc {
                Some(p) => p.truncate(&file, start),
                None => file.set_len(start),
            };
            if let Err(e) = undone {
                self.poison(format!("could not truncate after a failed write: {e}"));
            }
            self.fail_all(pending, &error);
            return Err(error);
        }
        let written = self.buf.len() as u64;
        self.buf.clear();
        self.active.len += written;
        if self.syncer.is_some() {
            self.unsynced.push_back(WrittenGroup {
                end: self.active.len,
                written,
                pending,
            });
            self.start_sync_if_due();
            return Ok(());
        }
        self.finish_group(pending, self.active.len, written);
        Ok(())
    }

    /// Publishes a written (and, under `Fsync`, synced) group to readers and completes it.
    fn finish_group(&mut self, pending: Vec<Pending>, end: u64, written: u64) {
        if let (Some(first), Some(last)) = (pending.first(), pending.last()) {
            let records = last.header.next_offset() - first.header.base_offset;
            self.shared.stats.record_commit(records, written);
        }
        for p in &pending {
            self.note_batch(p.position, &p.header);
        }
        self.published_len = end;
        self.publish();
        self.complete(
            pending
                .into_iter()
                .map(|p| {
                    let appended = Appended {
                        base_offset: p.header.base_offset,
                        last_offset: p.header.last_offset(),
                    };
                    (p.done, Ok(appended))
                })
                .collect(),
        );
    }

    /// Starts a sync of everything written, unless one already covers it or two are running
    /// (the groups written meanwhile get the next sync, started when one of those ends).
    fn start_sync_if_due(&mut self) {
        let Some(syncer) = &mut self.syncer else {
            return;
        };
        if self.sync_target >= self.active.len || !syncer.has_room() {
            return;
        }
        // After a failed fdatasync a retry may report success although the kernel dropped
        // the dirty pages: a poisoned log is never synced again.
        if self.shared.poison_error().is_some() {
            return;
        }
        syncer.start_sync(self.active.file.clone(), self.active.len);
        self.sync_target = self.active.len;
    }

    /// With two syncs running, waits for one to end before the next group is written, so
    /// that every group gets its sync as soon as it is written, and what arrives meanwhile
    /// forms one next group rather than many small writes.
    fn make_room_for_a_sync(&mut self) {
        let full = self.syncer.as_ref().is_some_and(|s| !s.has_room());
        if full && let Some(synced) = self.syncer.as_mut().and_then(Syncer::wait_finished) {
            self.on_synced(synced);
        }
    }

    /// Handles every sync that has finished, without waiting.
    fn collect_synced(&mut self) {
        while let Some(synced) = self.syncer.as_mut().and_then(Syncer::try_finished) {
            self.on_synced(synced);
        }
    }

    /// Waits for every sync in flight, starting more until all written groups are completed
    /// (or failed): a roll, an explicit sync or a close needs everything written durable.
    fn drain_syncs(&mut self) {
        loop {
            self.start_sync_if_due();
            let Some(synced) = self.syncer.as_mut().and_then(Syncer::wait_finished) else {
                break;
            };
            self.on_synced(synced);
        }
        debug_assert!(self.unsynced.is_empty());
    }

    /// Completes the groups a finished sync covers, or fails them all if it failed.
    fn on_synced(&mut self, synced: Synced) {
        if let Err(e) = synced.result {
            let segment = &self.active.segment;
            if self.shared.poison_error().is_none() {
                let cause = format!("fdatasync of {} failed: {e}", segment.log_path.display());
                self.poison(cause);
            }
            let error = self.shared.poison_error().expect("just poisoned");
            // Nothing written since the last good sync can be trusted, whichever sync of it
            // is still running.
            let failed = self.unsynced.drain(..).flat_map(|g| g.pending).collect();
            self.fail_all(failed, &error);
            return;
        }
        // Only a failed sync poisons a log with syncs in flight (every other cause drains
        // them first), and it has failed every group it left.
        if self.shared.poison_error().is_some() {
            return;
        }
        self.shared
            .stats
            .record_fsync(synced.took.as_nanos() as u64);
        metrics::histogram!("ferry_storage_fsync_seconds").record(synced.took.as_secs_f64());
        self.synced_len = self.synced_len.max(synced.up_to);
        self.last_sync = Instant::now();
        while self
            .unsynced
            .front()
            .is_some_and(|g| g.end <= self.synced_len)
        {
            let group = self.unsynced.pop_front().expect("checked above");
            self.finish_group(group.pending, group.end, group.written);
        }
        self.start_sync_if_due();
        self.maybe_checkpoint();
    }

    /// Adds an index entry when a batch starts a new index interval, and tracks timestamps.
    fn note_batch(&mut self, position: u64, header: &BatchHeader) {
        if let Some(entry) = self.active.index.note(position, header) {
            entry.encode(&mut self.unwritten_index);
            self.active
                .segment
                .index
                .write()
                .expect("index lock")
                .get_or_insert_with(Vec::new)
                .push(entry);
        }
        if position == 0 {
            self.active.created_ms = self.shared.clock.now_ms();
        }
        self.active.next_offset = header.next_offset();
    }

    fn publish(&self) {
        let mut extent = self.active.segment.extent.write().expect("extent lock");
        extent.len = self.published_len;
        extent.next_offset = self.active.next_offset;
        extent.max_timestamp = self.active.index.max_timestamp();
        drop(extent);
        self.shared
            .visible_end
            .store(self.active.next_offset, Ordering::Release);
    }

    fn sync_data(&mut self) -> Result<()> {
        // After a failed fdatasync a retry may report success although the kernel dropped
        // the dirty pages: never sync (or seal, or checkpoint) a poisoned log again.
        if let Some(e) = self.shared.poison_error() {
            return Err(e);
        }
        let segment = &self.active.segment;
        let started = Instant::now();
        if let Err(e) = self.active.file.sync_data() {
            let cause = format!("fdatasync of {} failed: {e}", segment.log_path.display());
            self.poison(cause);
            return Err(self.shared.poison_error().expect("just poisoned"));
        }
        let took = started.elapsed();
        self.shared.stats.record_fsync(took.as_nanos() as u64);
        metrics::histogram!("ferry_storage_fsync_seconds").record(took.as_secs_f64());
        self.synced_len = self.active.len;
        self.last_sync = Instant::now();
        Ok(())
    }

    /// Syncs whatever is written but not yet durable and refreshes the checkpoint.
    fn sync_active(&mut self) -> Result<()> {
        self.drain_syncs();
        if let Some(e) = self.shared.poison_error() {
            return Err(e);
        }
        if self.synced_len != self.active.len {
            self.sync_data()?;
        }
        self.maybe_checkpoint();
        Ok(())
    }

    fn maybe_checkpoint(&mut self) {
        if self.last_checkpoint.elapsed() < self.shared.config.checkpoint_interval {
            return;
        }
        if let Err(e) = self.write_checkpoint() {
            tracing::warn!(dir = %self.shared.dir.display(), error = %e, "checkpoint write failed; recovery will scan further");
        }
    }

    /// Flushes pending index entries, then records the synced position. The index entries
    /// need no fsync of their own: each carries a checksum and recovery only trusts entries
    /// below the checkpoint.
    fn write_checkpoint(&mut self) -> Result<()> {
        self.last_checkpoint = Instant::now();
        self.write_index_entries()?;
        Checkpoint {
            segment_base: self.active.segment.base_offset,
            position: self.synced_len,
            next_offset: self.synced_next_offset(),
            max_timestamp: self.active.index.max_timestamp(),
            segment_created_ms: self.active.created_ms,
        }
        .write(&self.shared.dir)
    }

    /// Checkpoints are only taken when everything published is synced and nothing synced
    /// is unpublished, so the published next offset is the synced one.
    fn synced_next_offset(&self) -> u64 {
        debug_assert_eq!(self.synced_len, self.published_len);
        self.active.next_offset
    }

    fn write_index_entries(&mut self) -> Result<()> {
        if self.unwritten_index.is_empty() {
            return Ok(());
        }
        let path = &self.active.segment.index_path;
        self.index_file
            .write_all_at(&self.unwritten_index, self.active.index_file_len)
            .ctx("write index", path)?;
        self.active.index_file_len += self.unwritten_index.len() as u64;
        self.unwritten_index.clear();
        Ok(())
    }

    /// Seals the active segment and starts the next. Order matters for crash safety:
    /// 1. the data is synced, so a sealed segment never has a torn tail;
    /// 2. the next segment is created (and its name made durable) before the old one gets its
    ///    footer, so a failure here (ENOSPC) leaves the old segment active and unchanged;
    /// 3. the footer is written and synced. A crash between 2 and 3 leaves a sealed segment
    ///    without footer, which recovery verifies and re-indexes by scanning.
    fn roll(&mut self) -> Result<()> {
        // No sync of the old segment may still be running: its result would be taken for
        // the new one's.
        self.drain_syncs();
        if let Some(e) = self.shared.poison_error() {
            return Err(e);
        }
        if self.synced_len != self.active.len {
            self.sync_data()?;
        }
        let next_base = self.active.next_offset;
        let dir = self.shared.dir.clone();
        let extent = Extent {
            next_offset: next_base,
            max_timestamp: i64::MIN,
            len: 0,
            sealed: false,
        };
        let created = Segment::open_active(&dir, next_base, extent).and_then(|segment| {
            let index_file = open_index(&segment)?;
            fs_util::sync_dir(&dir)?;
            Ok((segment, index_file))
        });
        // The new names were made durable above: their removal must be too, or a power loss
        // brings back an empty segment whose base offset later appends also use.
        let remove_new = |writer: &Self| {
            let _ = std::fs::remove_file(crate::segment::log_path(&dir, next_base));
            let _ = std::fs::remove_file(crate::segment::index_path(&dir, next_base));
            if let Err(e) = fs_util::sync_dir(&dir) {
                writer.poison(format!("could not undo a failed segment roll: {e}"));
            }
        };
        let (segment, index_file) = match created {
            Ok((segment, index_file)) => {
                let earlier = self.active.segment.max_timestamp_so_far();
                segment
                    .earlier_max_timestamp
                    .store(earlier, Ordering::Release);
                (Arc::new(segment), index_file)
            }
            Err(e) => {
                remove_new(self);
                return Err(e);
            }
        };
        let new_file = match segment.file() {
            Ok(file) => file,
            Err(e) => {
                remove_new(self);
                return Err(e);
            }
        };
        // The preallocator moves on first, so it cannot re-extend the old file after its
        // zero tail is cut: a sealed segment is exactly as long as its data.
        if let Some(p) = &self.prealloc {
            p.switch_to(segment.clone(), 0);
        }
        if let Err(e) = self.drop_zero_tail().and_then(|()| self.seal_index()) {
            if let Some(p) = &self.prealloc {
                p.switch_to(self.active.segment.clone(), self.active.len);
            }
            remove_new(self);
            return Err(e);
        }
        *segment.index.write().expect("index lock") = Some(Vec::new());
        {
            // Sealing the old segment and adding the new one is one step for retention,
            // which deletes sealed segments: between the two it would see no active one.
            let mut segments = self.shared.segments.write().expect("segments lock");
            self.active
                .segment
                .extent
                .write()
                .expect("extent lock")
                .sealed = true;
            segments.push(segment.clone());
        }
        // A sealed segment's index is loaded on demand under the cache bound; keeping every
        // rolled segment's index in memory would grow without limit.
        *self.active.segment.index.write().expect("index lock") = None;
        self.active.segment.release_file();
        self.index_file = index_file;
        self.active = ActiveState {
            segment,
            file: new_file,
            len: 0,
            next_offset: next_base,
            created_ms: self.shared.clock.now_ms(),
            index: IndexBuilder::new(next_base, self.shared.config.index_interval_bytes),
            index_file_len: 0,
        };
        self.synced_len = 0;
        self.published_len = 0;
        self.sync_target = 0;
        if let Err(e) = self.write_checkpoint() {
            // The roll itself is complete; without a fresh checkpoint the next recovery just
            // scans the new (small) active segment from its start.
            tracing::warn!(dir = %dir.display(), error = %e, "checkpoint after roll failed");
        }
        Ok(())
    }

    /// Cuts preallocated zeros off the end of the active segment.
    fn drop_zero_tail(&self) -> Result<()> {
        let file = &self.active.file;
        let path = &self.active.segment.log_path;
        let file_len = file.metadata().ctx("stat", path)?.len();
        if file_len > self.active.len {
            file.set_len(self.active.len).ctx("truncate", path)?;
            file.sync_all().ctx("fsync", path)?;
        }
        Ok(())
    }

    /// Rewrites the active segment's index whole, with its footer, and syncs it.
    fn seal_index(&mut self) -> Result<()> {
        let segment = &self.active.segment;
        let entries = segment
            .index
            .read()
            .expect("index lock")
            .clone()
            .unwrap_or_default();
        let mut bytes = Vec::with_capacity(entries.len() * index::ENTRY_LEN + index::FOOTER_LEN);
        for entry in &entries {
            entry.encode(&mut bytes);
        }
        Footer {
            entry_count: entries.len() as u64,
            next_offset: self.active.next_offset,
            max_timestamp: self.active.index.max_timestamp(),
            segment_len: self.active.len,
            entries_crc: crc32c::crc32c(&bytes),
        }
        .encode(&mut bytes);
        let path = &segment.index_path;
        let written = self
            .index_file
            .set_len(0)
            .and_then(|()| self.index_file.write_all_at(&bytes, 0))
            .and_then(|()| self.index_file.sync_data());
        if let Err(e) = written {
            // The file is now in an unknown state: have the next checkpoint rewrite it whole.
            self.unwritten_index = bytes[..entries.len() * index::ENTRY_LEN].to_vec();
            self.active.index_file_len = 0;
            let _ = self.index_file.set_len(0);
            return Err(StorageError::io("write index", path, e));
        }
        self.unwritten_index.clear();
        self.active.index_file_len = bytes.len() as u64;
        Ok(())
    }

    fn complete(&self, completed: Completed) {
        let inline = completed.len() <= INLINE_COMPLETIONS
            && self.completer_backlog.load(Ordering::Acquire) == 0;
        match &self.completer {
            Some((sender, _)) if !inline => {
                self.completer_backlog.fetch_add(1, Ordering::AcqRel);
                if let Err(mpsc::SendError(completed)) = sender.send(completed) {
                    self.completer_backlog.fetch_sub(1, Ordering::AcqRel);
                    completed
                        .into_iter()
                        .for_each(|(done, result)| done(result));
                }
            }
            _ => completed
                .into_iter()
                .for_each(|(done, result)| done(result)),
        }
    }

    fn fail_all(&self, pending: Vec<Pending>, error: &StorageError) {
        let failed = pending
            .into_iter()
            .map(|p| (p.done, Err(error.duplicate())))
            .collect();
        self.complete(failed);
    }

    fn poison(&self, cause: String) {
        tracing::error!(dir = %self.shared.dir.display(), %cause, "log poisoned: reopen it to recover");
        *self.shared.poisoned.lock().expect("poison lock") = Some(cause);
    }

    /// Clean stop: everything staged is written and synced, and the checkpoint points at the
    /// end, so the next open scans nothing.
    fn shutdown(&mut self) {
        let result = self.flush().and_then(|()| {
            self.drain_syncs();
            if self.shared.poison_error().is_some() {
                return Ok(());
            }
            if self.synced_len != self.active.len {
                self.sync_data()?;
            }
            // A cleanly closed log carries no preallocated zeros.
            self.prealloc.take();
            self.drop_zero_tail()?;
            self.write_checkpoint()
        });
        if let Err(e) = result {
            tracing::warn!(dir = %self.shared.dir.display(), error = %e, "log did not close cleanly");
        }
        self.syncer.take();
        if let Some((sender, handle)) = self.completer.take() {
            drop(sender);
            let _ = handle.join();
        }
    }
}

fn open_index(segment: &Segment) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&segment.index_path)
        .ctx("open index", &segment.index_path)
}
