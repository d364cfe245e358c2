//! Zero-filled space ahead of the active segment's end, prepared by a background thread.
//!
//! Why: on ext4 (and most journaling file systems) an `fdatasync` after a write that extends
//! the file must also commit the new size and block allocation to the journal; one after a
//! write into blocks that already exist and hold data does not. Measured here that is about
//! twice the fdatasyncs per second, and with group commit the fdatasync rate is the
//! throughput limit for small records. `fallocate` is not enough: it leaves "unwritten"
//! extents whose conversion is again a journal commit. So the space is really written, with
//! zeros, and synced, by a thread of its own so the writer never waits for it (PostgreSQL
//! pre-zeroes its WAL segments for the same reason).
//!
//! How much: a log's zeroed room starts at [`FIRST_CHUNK`] and doubles, up to the configured
//! `preallocate_bytes`, each time the log asks for more within [`RAMP_WITHIN`] of its last
//! request, so it settles at about what the log writes in that long. A busy log reaches the
//! configured size within its first megabytes; a quiet one — a subscription's references,
//! the journal of a queue read now and then — keeps a few hundred KiB. Nothing is zeroed
//! before a log's first write, nor in a new segment before its first write: a thousand
//! idle queues cost no disk, and a log whose groups are too large for zeros to pay never
//! gets any. (With the configured size from the start, every log opened and every segment
//! rolled took twice that in zeros at once: fifty subscriptions of one topic wrote 900 MB
//! of zeros as they were created, and a queue taking 1 MiB groups wrote 16 MiB of zeros
//! with every 64 MiB segment. `docs/benchmarks.md` has the figures.)
//!
//! Invariants:
//! - the region `[data_end, zeroed_end)` holds only zeros (recovery treats an all-zero tail
//!   as the clean end of the log, not as a torn write);
//! - the preallocator only writes at or beyond `max(zeroed_end, data_end)`, and the writer
//!   never writes beyond `zeroed_end` while a fill is in progress, so they never write the
//!   same bytes.

use std::os::unix::fs::FileExt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::segment::Segment;

/// How long to wait before trying again after a fill failed (a full disk, most likely).
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The zeroed room a log starts with, and the step it grows by doubling.
pub(crate) const FIRST_CHUNK: u64 = 256 * 1024;

/// A request for more room within this long of the one before doubles the chunk: the room
/// ahead grows until it lasts the log about this long.
const RAMP_WITHIN: Duration = Duration::from_millis(250);

/// Whether zero-filling pays for itself at the current group size. Zeros cost a second write
/// of every byte; they save a journal commit per fdatasync. Measured on ext4 here: a clear
/// gain up to groups of ~64 KiB (the fdatasync rate nearly doubles), a loss from ~128 KiB
/// (the disk's bandwidth, not its fdatasync rate, is then the limit).
pub fn worth_it(average_group_bytes: u64) -> bool {
    average_group_bytes < 96 * 1024
}

#[derive(Debug, Default)]
struct State {
    segment: Option<Arc<Segment>>,
    /// Bytes below this are data or synced zeros.
    zeroed_end: u64,
    /// The writer's end, set before it writes.
    data_end: u64,
    /// Keep zeros up to here.
    wanted_end: u64,
    /// What one fill writes: from [`FIRST_CHUNK`] up to the configured size (see the
    /// module docs).
    chunk: u64,
    /// When the writer last asked for more room.
    last_request: Option<Instant>,
    filling: bool,
    failed_at: Option<Instant>,
    stop: bool,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug)]
pub(crate) struct Preallocator {
    shared: Arc<Shared>,
    /// The configured `preallocate_bytes`: the most one fill writes.
    max_chunk: u64,
    /// [`RAMP_WITHIN`], but for tests.
    ramp_within: Duration,
    thread: Option<JoinHandle<()>>,
}

impl Preallocator {
    /// Starts the thread; it zeroes nothing until the first [`before_write`](Self::before_write)
    /// asks for room.
    pub fn start(segment: Arc<Segment>, data_end: u64, max_chunk: u64) -> std::io::Result<Self> {
        Self::start_ramping_within(segment, data_end, max_chunk, RAMP_WITHIN)
    }

    fn start_ramping_within(
        segment: Arc<Segment>,
        data_end: u64,
        max_chunk: u64,
        ramp_within: Duration,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                segment: Some(segment),
                zeroed_end: data_end,
                data_end,
                wanted_end: data_end,
                chunk: FIRST_CHUNK.min(max_chunk),
                ..State::default()
            }),
            changed: Condvar::new(),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("ferry-log-prealloc".into())
                .spawn(move || fill_loop(&shared, max_chunk))?
        };
        Ok(Preallocator {
            shared,
            max_chunk,
            ramp_within,
            thread: Some(thread),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().expect("preallocation lock")
    }

    /// Waits until no fill is running; the guard keeps it so.
    fn idle(&self) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        while state.filling {
            state = self.shared.changed.wait(state).expect("preallocation lock");
        }
        state
    }

    /// Called before the writer writes up to `end`. Returns at once when `end` lies in
    /// zeroed space or no fill is running; otherwise waits for the running fill (the writer
    /// has caught up with the preallocator, which only happens when the disk is saturated).
    /// `wanted` says whether more zeros are worth their bandwidth (see `worth_it`).
    pub fn before_write(&self, end: u64, wanted: bool) {
        let mut state = self.lock();
        while state.filling && end > state.zeroed_end {
            state = self.shared.changed.wait(state).expect("preallocation lock");
        }
        state.data_end = state.data_end.max(end);
        // A new request, unless one already asked for enough.
        if wanted && state.zeroed_end < end + state.chunk && state.wanted_end < end + state.chunk {
            let now = Instant::now();
            if state
                .last_request
                .is_some_and(|at| now.duration_since(at) < self.ramp_within)
            {
                state.chunk = (state.chunk * 2).min(self.max_chunk);
            }
            state.last_request = Some(now);
            state.wanted_end = end + 2 * state.chunk;
            self.shared.changed.notify_all();
        }
    }

    /// How much one fill writes now (see the module docs).
    #[cfg(test)]
    fn chunk(&self) -> u64 {
        self.lock().chunk
    }

    /// Where the zeroed room ends once the fills asked for so far are done.
    #[cfg(test)]
    fn zeroed_end(&self) -> u64 {
        let mut state = self.lock();
        while state.filling || (state.zeroed_end < state.wanted_end && state.failed_at.is_none()) {
            state = self.shared.changed.wait(state).expect("preallocation lock");
        }
        state.zeroed_end
    }

    /// Cuts the file back to `end` (after a failed write, or to drop the zero tail) with no
    /// fill running, so a fill cannot re-extend it behind the writer's back.
    pub fn truncate(&self, file: &std::fs::File, end: u64) -> std::io::Result<()> {
        let mut state = self.idle();
        file.set_len(end)?;
        state.data_end = end;
        state.zeroed_end = state.zeroed_end.min(end);
        Ok(())
    }

    /// Stops filling the current segment and moves to `segment`, whose data ends at
    /// `data_end`. As at the start, nothing is zeroed there until a write asks for room:
    /// a log writing groups too large for zeros to pay (see [`worth_it`]) never gets any.
    /// (Zeroing twice the configured size ahead of every new segment regardless cost such
    /// a log a quarter more device writes with 64 MiB segments.) The chunk carries over: a
    /// log rolls while it writes.
    pub fn switch_to(&self, segment: Arc<Segment>, data_end: u64) {
        let mut state = self.idle();
        state.segment = Some(segment);
        state.zeroed_end = data_end;
        state.data_end = data_end;
        state.wanted_end = data_end;
        state.failed_at = None;
        self.shared.changed.notify_all();
    }
}

impl Drop for Preallocator {
    fn drop(&mut self) {
        self.lock().stop = true;
        self.shared.changed.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Zeros are an optimisation and must never take the last of the disk: a fill that runs
/// the file system out of space fails the appends of every other log on it meanwhile (the
/// space comes back only when the fill gives up), and those may be writes that must not
/// fail on a nearly full disk, such as a queue's acks. So a fill starts only while at least
/// as much as it takes would stay free after it.
fn has_room_for(path: &std::path::Path, chunk: u64) -> std::io::Result<()> {
    let available =
        crate::fs_util::available_bytes(path).map_err(|e| std::io::Error::other(e.to_string()))?;
    if available < chunk.saturating_mul(2) {
        return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
    }
    Ok(())
}

fn fill_loop(shared: &Shared, max_chunk: u64) {
    // Written in pieces: a write holds the file's inode lock for its whole length, and one
    // 8 MiB write would stall the writer's next group write behind it for milliseconds.
    const PIECE: u64 = 128 * 1024;
    let zeros = vec![0u8; PIECE.min(max_chunk) as usize];
    let mut state = shared.state.lock().expect("preallocation lock");
    loop {
        if state.stop {
            return;
        }
        let retry_wait = state
            .failed_at
            .map(|at| RETRY_AFTER.saturating_sub(at.elapsed()));
        let due = state.zeroed_end < state.wanted_end && retry_wait.is_none_or(|w| w.is_zero());
        let Some(segment) = state.segment.clone().filter(|_| due) else {
            state = match retry_wait {
                Some(wait) if !wait.is_zero() => {
                    shared
                        .changed
                        .wait_timeout(state, wait)
                        .expect("preallocation lock")
                        .0
                }
                _ => shared.changed.wait(state).expect("preallocation lock"),
            };
            continue;
        };
        let from = state.zeroed_end.max(state.data_end);
        let chunk = state.chunk;
        state.filling = true;
        drop(state);

        let result = has_room_for(&segment.log_path, chunk)
            .and_then(|()| fill(&segment, from, chunk, &zeros));

        state = shared.state.lock().expect("preallocation lock");
        state.filling = false;
        match result {
            Ok(()) => {
                state.zeroed_end = from + chunk;
                state.failed_at = None;
            }
            Err(_) => {
                state.zeroed_end = from;
                state.failed_at = Some(Instant::now());
            }
        }
        shared.changed.notify_all();
    }
}

/// Writes `chunk` bytes of zeros at `from` and syncs them; on failure gives the space back.
fn fill(segment: &Segment, from: u64, chunk: u64, zeros: &[u8]) -> std::io::Result<()> {
    let file = segment
        .file()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let result = (0..chunk.div_ceil(zeros.len() as u64))
        .try_for_each(|i| {
            let at = i * zeros.len() as u64;
            let n = (chunk - at).min(zeros.len() as u64) as usize;
            file.write_all_at(&zeros[..n], from + at)
        })
        .and_then(|()| file.sync_data());
    if let Err(e) = &result {
        // Give the space back: the writer needs it more than we do.
        let _ = file.set_len(from);
        tracing::debug!(segment = %segment.log_path.display(), error = %e, "preallocation failed; retrying later");
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::Extent;

    const MAX: u64 = 4 * FIRST_CHUNK;

    fn extent() -> Extent {
        Extent {
            next_offset: 0,
            max_timestamp: i64::MIN,
            len: 0,
            sealed: false,
        }
    }

    fn start(dir: &std::path::Path, ramp_within: Duration) -> (Arc<Segment>, Preallocator) {
        let segment = Arc::new(Segment::open_active(dir, 0, extent()).unwrap());
        let p = Preallocator::start_ramping_within(segment.clone(), 0, MAX, ramp_within).unwrap();
        (segment, p)
    }

    fn file_len(segment: &Segment) -> u64 {
        std::fs::metadata(&segment.log_path).unwrap().len()
    }

    #[test]
    fn nothing_is_zeroed_before_the_first_write() {
        let dir = tempfile::tempdir().unwrap();
        // No request counts as quick: the room stays one size.
        let (segment, p) = start(dir.path(), Duration::ZERO);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(p.zeroed_end(), 0);
        assert_eq!(file_len(&segment), 0);
        p.before_write(100, true);
        assert_eq!(p.zeroed_end(), 100 + 2 * FIRST_CHUNK);
        assert_eq!(file_len(&segment), 100 + 2 * FIRST_CHUNK);

        // Nor in the next segment before a write there asks for room.
        let next = Arc::new(Segment::open_active(dir.path(), 1000, extent()).unwrap());
        p.switch_to(next.clone(), 0);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(p.zeroed_end(), 0);
        assert_eq!(file_len(&next), 0);
        p.before_write(200, true);
        assert_eq!(p.zeroed_end(), 200 + 2 * FIRST_CHUNK);
        assert_eq!(file_len(&next), 200 + 2 * FIRST_CHUNK);
    }

    #[test]
    fn requests_in_quick_succession_double_the_room_up_to_the_configured_size() {
        let dir = tempfile::tempdir().unwrap();
        // Every request counts as quick, however slow the disk.
        let (segment, p) = start(dir.path(), Duration::from_secs(3600));
        let mut chunks = Vec::new();
        let mut end = 100;
        for _ in 0..5 {
            p.before_write(end, true);
            chunks.push(p.chunk());
            // The writer uses the room up to where a new request is due.
            end = p.zeroed_end();
        }
        let k = FIRST_CHUNK;
        assert_eq!(chunks, [k, 2 * k, 4 * k, 4 * k, 4 * k]);
        assert_eq!(file_len(&segment), end);
    }

    #[test]
    fn a_log_asking_seldom_keeps_the_first_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let ramp_within = Duration::from_millis(5);
        let (segment, p) = start(dir.path(), ramp_within);
        let mut end = 100;
        for _ in 0..3 {
            p.before_write(end, true);
            end = p.zeroed_end();
            std::thread::sleep(ramp_within * 4);
        }
        assert_eq!(p.chunk(), FIRST_CHUNK);
        assert_eq!(file_len(&segment), end);
    }

    #[test]
    fn no_room_is_asked_for_while_zeros_are_not_worth_it() {
        let dir = tempfile::tempdir().unwrap();
        let (segment, p) = start(dir.path(), RAMP_WITHIN);
        p.before_write(100, false);
        assert_eq!(p.zeroed_end(), 0);
        assert_eq!(file_len(&segment), 0);
    }
}
